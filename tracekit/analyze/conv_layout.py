"""Convolutions on a CPU run on NCHW tensors.

oneDNN's CPU convolutions run fastest on channels-last (NHWC) tensors: on PyTorch's default NCHW
ones they reorder the activations to and from a blocked layout or run slower kernels, forward and
backward, and the batch norms, ReLUs and poolings between them run on NCHW too. PyTorch 2.13 on a
2-core AMD EPYC (AVX-512), training step, unprofiled: a 3-conv CNN at batch 32 on 32x32 images took
56.1 ms in NCHW and 41.2 ms with the model and input in ``torch.channels_last`` (inference 22.2 ->
10.8 ms); a ResNet-style stem and 4 blocks at batch 8 on 112x112 60.4 -> 52.1 ms (inference 24.9 ->
20.9); restricted to AVX2 the 3-conv CNN 55.2 -> 44.7 ms (inference 16.3 -> 11.2). On a GPU the
layout shows as cuDNN's conversion kernels, told elsewhere (``tracekit.analyze.verdicts``).

The evidence (CPU-only PyTorch traces with shapes recorded, ``record_shapes=True``, which records
the inputs' strides too): the convolutions (``aten::convolution`` calls and the backward's
``aten::convolution_backward``) take ``MIN_SHARE`` of the steps' time, and most of that time is on
4-D inputs whose strides are NCHW's (channel stride H*W, more than one channel and pixel).

The gain is the convolutions' alone: ops between them that run slower in channels_last, or convert
back, can take it all. A diffusers ``UNet2DModel`` (GroupNorm, SiLU, attention; 2 levels of 32 and 64
channels) trained at batch 8 on 32x32 took 173-203 ms a step in NCHW and 171-205 ms in channels_last
(4 runs each, interleaved): its convolutions ran 15% faster, but GroupNorm's backward twice as slow,
and its ``ResnetBlock2D`` calls ``input_tensor.contiguous()`` before the shortcut convolution in
training, which converts that input back to NCHW (and the convolution converts it again). Where the
steps run GroupNorm on 4-D tensors, the remedy says so and asks for the step to be timed both ways.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame, calls_in_steps
from tracekit.analyze.top_ops import args_mention, args_text, first_input_shape, input_dims

CONVOLUTION_OPS = ("aten::convolution", "aten::convolution_backward")
GROUP_NORM_OPS = ("aten::native_group_norm", "aten::native_group_norm_backward")
MIN_SHARE = 0.3  # of the steps' time in convolutions
NCHW_SHARE = 0.5  # of the convolutions' time, on NCHW inputs
_INPUT_STRIDES = r'"Input Strides":(?P<strides>\[(?:\[[^\]]*\]|[^\[\]])*\])'


@dataclass(frozen=True)
class NchwConvolutions:
    """The steps' convolutions on NCHW inputs (module doc). share: the convolutions' part of the steps'
    time; nchw_share: the part of that on NCHW inputs; example: one such input's shape and strides."""

    share: float
    nchw_share: float
    example: str
    group_norm_share: float = 0.0  # GroupNorm's part of the steps' time (4-D inputs), 0 where it runs none

    def evidence(self) -> str:
        return (f"convolutions take {self.share:.0%} of the step time, {self.nchw_share:.0%} of it on NCHW tensors "
                f"({self.example}): a CPU's oneDNN convolutions run slower on NCHW than on channels-last tensors "
                "(reorders to and from a blocked layout, or slower kernels), forward and backward")

    def remedy(self) -> str:
        return ("keep the model and its input in channels_last on this CPU: model.to(memory_format=torch.channels_last) "
                "and x.to(memory_format=torch.channels_last) (a 3-conv CNN, batch 32: 56 -> 41 ms a training step, "
                "22 -> 11 ms inference; a ResNet-style net 60 -> 52 ms; on AVX2 too); a Keras 3 model on the torch "
                "backend: its layers' data_format='channels_last', Keras' default (a 2-conv CNN trained at batch 32: "
                "83 -> 67 ms a step from channels_first)" + self._group_norm_caveat())

    def _group_norm_caveat(self) -> str:
        if not self.group_norm_share:
            return ""
        return (f"; this model also runs GroupNorm ({self.group_norm_share:.1%} of the step), slower in channels_last "
                "on a CPU, and layers that call .contiguous() on an activation convert it back to NCHW: time the step "
                "both ways before keeping it (a diffusers UNet2DModel trained at batch 8: its convolutions 15% faster, "
                "GroupNorm's backward twice as slow, 173-203 ms a step in NCHW and 171-205 ms in channels_last)")

    def as_dict(self) -> dict[str, object]:
        return {"share": self.share, "nchw_share": self.nchw_share, "example": self.example,
                "group_norm_share": self.group_norm_share}


def nchw_convolutions(frame: Frame, used: list[int] | None) -> NchwConvolutions | None:
    """The steps' convolutions when most of their time is on NCHW inputs (module doc), else None."""
    if frame.rows(*GPU_BUSY_KINDS).size or not args_mention(frame.table, b'"Input Strides"'):
        return None
    calls, steps = calls_in_steps(frame, CONVOLUTION_OPS, used)
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    conv_ns = int(frame.dur[calls].sum())
    if not step_ns or conv_ns < MIN_SHARE * step_ns:
        return None
    found = pc.fill_null(pc.struct_field(pc.extract_regex(args_text(frame.table, calls), _INPUT_STRIDES), "strides"),
                         "").dictionary_encode()
    codes_of = found.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    layouts = [_nchw(text) for text in found.dictionary.to_pylist()]
    nchw = np.array([layout is not None for layout in layouts], bool)[codes_of] if layouts else np.zeros(calls.size, bool)
    nchw_ns = int(frame.dur[calls[nchw]].sum())
    if nchw_ns < NCHW_SHARE * conv_ns:
        return None
    longest = int(np.flatnonzero(nchw)[np.argmax(frame.dur[calls[nchw]])])
    dims_code, dims = input_dims(frame.table, calls[longest:longest + 1])
    try:
        shape = "x".join(str(d) for d in json.loads(dims[int(dims_code[0])])[0])
    except (ValueError, IndexError, TypeError):
        shape = "input"
    example = f"{frame.name(int(calls[longest]))} {shape}, {layouts[int(codes_of[longest])]}"
    return NchwConvolutions(share=conv_ns / step_ns, nchw_share=nchw_ns / conv_ns, example=example,
                            group_norm_share=_group_norm_ns(frame, used) / step_ns)


def _group_norm_ns(frame: Frame, used: list[int] | None) -> int:
    """The steps' time in GroupNorm calls on 4-D inputs (an image model's activations)."""
    calls, _ = calls_in_steps(frame, GROUP_NORM_OPS, used)
    if not calls.size:
        return 0
    codes, texts = input_dims(frame.table, calls)
    four_d = np.array([len(first_input_shape(t) or []) == 4 for t in texts], bool)
    return int(frame.dur[calls[four_d[codes]]].sum())


def _nchw(strides_text: str) -> str | None:
    """"strides [s0, s1, s2, s3]" where the first input's 4-D strides are NCHW's, [C*H*W, H*W, W, 1] with
    C, H and W above 1; None otherwise (channels_last's are [H*W*C, 1, W*C, C])."""
    try:
        strides = json.loads(strides_text) if strides_text else []
    except ValueError:
        return None
    if not strides or not isinstance(strides[0], list) or len(strides[0]) != 4:
        return None
    n, c, h, w = strides[0]
    if not all(isinstance(s, int) for s in (n, c, h, w)) or w != 1 or h <= 1 or c <= h or c % h or n <= c or n % c:
        return None
    return f"strides {strides[0]}"
