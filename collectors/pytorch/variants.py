"""The PyTorch LSTM variants: one LSTM written many ways, all with the same weights and inputs.

Every layer variant computes the same function as ``nn.LSTM`` built from ``make_weights`` (gate
order i, f, g, o; two biases), on input [timesteps, batch, input], from zero state, and returns
the hidden state of every timestep [timesteps, batch, hidden]. The language-model variants are in
``lm.py``.

Where the variants differ is how the work reaches the device (research/torch_profiler.md):
``nn_lstm`` is one fused op (cuDNN on GPU, oneDNN ``mkldnn_rnn_layer`` on CPU); ``lstmcell_loop``
dispatches ~47 ops per timestep on CPU; ``custom_*`` are the textbook equations in fine-grained
ops, eager, under TorchScript, and under ``torch.compile``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from tracekit.collectors.sweep import LayerConfig


@dataclass
class Weights:
    """Weights of a stack of LSTM layers in nn.LSTM's layout; ``lstm`` is the module they came from."""

    lstm: nn.LSTM

    def layer(self, index: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        m = self.lstm
        return (getattr(m, f"weight_ih_l{index}"), getattr(m, f"weight_hh_l{index}"),
                getattr(m, f"bias_ih_l{index}"), getattr(m, f"bias_hh_l{index}"))


def make_weights(config: LayerConfig, device: torch.device, seed: int = 0) -> Weights:
    torch.manual_seed(seed)
    return Weights(nn.LSTM(config.input, config.hidden, num_layers=config.layers).to(device))


def make_input(config: LayerConfig, device: torch.device, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed + 1)
    return torch.randn(config.timesteps, config.batch, config.input, generator=generator).to(device)


def lstm_step(x: torch.Tensor, h: torch.Tensor, c: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor,
              b_ih: torch.Tensor, b_hh: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One timestep of the LSTM equations in fine-grained ops (TorchScript-compatible)."""
    gates = torch.mm(x, w_ih.t()) + b_ih + torch.mm(h, w_hh.t()) + b_hh
    i, f, g, o = gates.chunk(4, 1)
    i = torch.sigmoid(i)
    f = torch.sigmoid(f)
    g = torch.tanh(g)
    o = torch.sigmoid(o)
    c = f * c + i * g
    h = o * torch.tanh(c)
    return h, c


class CustomLSTM(nn.Module):
    """A single-layer LSTM as a Python loop over ``lstm_step``; the unit of the custom variants."""

    def __init__(self, weights: Weights) -> None:
        super().__init__()
        w_ih, w_hh, b_ih, b_hh = weights.layer(0)
        self.w_ih, self.w_hh = nn.Parameter(w_ih.detach().clone()), nn.Parameter(w_hh.detach().clone())
        self.b_ih, self.b_hh = nn.Parameter(b_ih.detach().clone()), nn.Parameter(b_hh.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(x.size(1), self.w_hh.size(1), device=x.device, dtype=x.dtype)
        c = torch.zeros_like(h)
        outputs: list[torch.Tensor] = []
        for t in range(x.size(0)):
            h, c = lstm_step(x[t], h, c, self.w_ih, self.w_hh, self.b_ih, self.b_hh)
            outputs.append(h)
        return torch.stack(outputs)


class CompiledStepLSTM(nn.Module):
    """The custom LSTM with its *step* under ``torch.compile``.

    Compiling the step rather than the whole loop keeps compile time independent of timesteps
    (Dynamo unrolls a Python loop: the 50-step loop took 46-63 s to compile cold on a 2-core CPU)
    and is how long sequences are compiled in practice. In ``reduce-overhead`` mode each step
    replays a CUDA graph whose output buffers are reused, so outputs are cloned before the next
    replay.
    """

    def __init__(self, weights: Weights, mode: str | None) -> None:
        super().__init__()
        self.inner = CustomLSTM(weights)
        self.mode = mode
        self.step = torch.compile(lstm_step, mode=mode, dynamic=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.inner
        h = torch.zeros(x.size(1), m.w_hh.size(1), device=x.device, dtype=x.dtype)
        c = torch.zeros_like(h)
        outputs: list[torch.Tensor] = []
        graphs = self.mode == "reduce-overhead"
        for t in range(x.size(0)):
            if graphs:
                torch.compiler.cudagraph_mark_step_begin()
            h, c = self.step(x[t], h, c, m.w_ih, m.w_hh, m.b_ih, m.b_hh)
            if graphs:
                h, c = h.clone(), c.clone()
            outputs.append(h)
        return torch.stack(outputs)


class CellLoop(nn.Module):
    """``nn.LSTMCell`` called once per timestep from Python."""

    def __init__(self, weights: Weights) -> None:
        super().__init__()
        w_ih, w_hh, b_ih, b_hh = weights.layer(0)
        self.cell = nn.LSTMCell(w_ih.size(1), w_hh.size(1)).to(w_ih.device)
        with torch.no_grad():
            for dst, src in zip((self.cell.weight_ih, self.cell.weight_hh, self.cell.bias_ih, self.cell.bias_hh),
                                (w_ih, w_hh, b_ih, b_hh), strict=True):
                dst.copy_(src)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(x.size(1), self.cell.hidden_size, device=x.device, dtype=x.dtype)
        c = torch.zeros_like(h)
        outputs = []
        for t in range(x.size(0)):
            h, c = self.cell(x[t], (h, c))
            outputs.append(h)
        return torch.stack(outputs)


class FusedLSTM(nn.Module):
    """``nn.LSTM`` returning only the per-timestep hidden states, like the other variants."""

    def __init__(self, weights: Weights) -> None:
        super().__init__()
        self.lstm = weights.lstm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lstm(x)[0]


def amp_dtype(device: torch.device) -> torch.dtype:
    """fp16 on GPU (the studies' AMP), bf16 on CPU (the only autocast type oneDNN's LSTM takes)."""
    return torch.float16 if device.type == "cuda" else torch.bfloat16


@functools.cache
def cpu_autocast_problem() -> str | None:
    """Why bf16 autocast of ``nn.LSTM`` cannot run on this CPU, or None when it can.

    oneDNN's bf16 LSTM needs AVX-512 (BW/VL/DQ), AVX512-BF16 or AMX; on an AVX2-only CPU it fails
    with "could not create a primitive descriptor". A tiny LSTM is run to find out, rather than
    guessing from CPU flags, so the answer holds for whatever oneDNN and CPU are here.
    """
    lstm = nn.LSTM(4, 4)
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            lstm(torch.zeros(2, 1, 4))
    except RuntimeError as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return f"bf16 nn.LSTM is not supported by oneDNN on this CPU (needs AVX-512 or AMX): {first.split('. ')[0]}"
    return None


@dataclass(frozen=True)
class LayerVariant:
    """A way of writing the LSTM layer: how to build it and what it needs."""

    name: str
    description: str
    build: Callable[[Weights, torch.device], nn.Module | Callable[[torch.Tensor], torch.Tensor]]
    layers: int = 1
    autocast: bool = False
    needs_gpu: bool = False
    mode: str = "eager"


def _script(weights: Weights, device: torch.device) -> Callable[[torch.Tensor], torch.Tensor]:
    return torch.jit.script(CustomLSTM(weights))


LAYER_VARIANTS: dict[str, LayerVariant] = {v.name: v for v in (
    LayerVariant("nn_lstm", "nn.LSTM, one layer: one fused op (cuDNN on GPU, oneDNN on CPU)",
                 lambda w, d: FusedLSTM(w)),
    LayerVariant("nn_lstm_stacked", "nn.LSTM, three stacked layers in one call",
                 lambda w, d: FusedLSTM(w), layers=3),
    LayerVariant("nn_lstm_amp", "nn.LSTM under torch.autocast (fp16 on GPU, bf16 on CPU)",
                 lambda w, d: FusedLSTM(w), autocast=True),
    LayerVariant("lstmcell_loop", "nn.LSTMCell called from a Python loop over timesteps",
                 lambda w, d: CellLoop(w)),
    LayerVariant("custom_eager", "the LSTM equations in fine-grained ops, eager",
                 lambda w, d: CustomLSTM(w)),
    LayerVariant("custom_script", "the fine-grained LSTM under torch.jit.script", _script, mode="torchscript"),
    LayerVariant("custom_compile", "the fine-grained LSTM step under torch.compile (default mode)",
                 lambda w, d: CompiledStepLSTM(w, None), mode="compile"),
    LayerVariant("custom_compile_cudagraphs", "the fine-grained LSTM step under torch.compile(mode='reduce-overhead')",
                 lambda w, d: CompiledStepLSTM(w, "reduce-overhead"), needs_gpu=True, mode="compile-reduce-overhead"),
)}
