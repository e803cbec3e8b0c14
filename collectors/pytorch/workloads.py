"""PyTorch variants at one config as ``Workload``s: ``step()`` does one step with every phase in ranges.

Phases are named ranges twice over: ``record_function("phase::NAME")`` for torch.profiler and an
NVTX range ``NAME`` (domain ``tracekit``) for Nsight Systems. Steps are NVTX ranges ``step#N``;
torch.profiler marks its own ``ProfilerStep#N``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
from torch.autograd.profiler import record_function
from tracekit.collectors.phases import nvtx_range
from tracekit.collectors.pytorch import lm as lm_model
from tracekit.collectors.pytorch.variants import LAYER_VARIANTS, amp_dtype, make_input, make_weights
from tracekit.collectors.sweep import LayerConfig, LMConfig
from tracekit.collectors.workload import Workload

LM_VARIANTS = {
    "lm_forward": "stacked LSTM language model, forward pass (no grad)",
    "lm_forward_script": "the language model under torch.jit.script, forward pass",
    "lm_train": "the language model, full training step: forward, loss, backward, SGD step",
}
VARIANTS: dict[str, str] = {**{name: v.description for name, v in LAYER_VARIANTS.items()}, **LM_VARIANTS}
DTYPE_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """A phase as torch.profiler sees it (``phase::NAME``) and as Nsight Systems does (NVTX ``NAME``)."""
    with nvtx_range(name), record_function(f"phase::{name}"):
        yield


def variant_dtype(variant: str, device: torch.device) -> str:
    v = LAYER_VARIANTS.get(variant)
    return DTYPE_NAMES[amp_dtype(device)] if v is not None and v.autocast else "fp32"


def build(variant: str, config: dict[str, int], device: torch.device, seed: int = 0) -> Workload:
    """The workload of ``variant`` at ``config`` (a LayerConfig or LMConfig as a dict) on ``device``."""
    if variant in LM_VARIANTS:
        return _build_lm(variant, LMConfig(**config), device, seed)
    v = LAYER_VARIANTS[variant]
    layer = LayerConfig(**config)
    weights = make_weights(layer, device, seed)
    x = make_input(layer, device, seed)
    module = v.build(weights, device)

    def forward() -> torch.Tensor:
        with torch.no_grad():
            if v.autocast:
                with torch.autocast(device.type, dtype=amp_dtype(device)):
                    return module(x)
            return module(x)

    return Workload(variant, "layer", layer.as_dict(), variant_dtype(variant, device), layer.timesteps, forward,
                    [("forward", forward)], phase)


def _build_lm(variant: str, config: LMConfig, device: torch.device, seed: int) -> Workload:
    model = lm_model.make_model(config, device, seed)
    tokens, targets = lm_model.make_batch(config, device, seed)
    runnable: Callable[[torch.Tensor], torch.Tensor] = model
    if variant == "lm_forward_script":
        runnable = torch.jit.script(model)

    def forward() -> torch.Tensor:
        with torch.no_grad():
            return runnable(tokens)

    if variant != "lm_train":
        return Workload(variant, "lm", config.as_dict(), "fp32", config.timesteps, forward, [("forward", forward)], phase)

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()
    state: dict[str, torch.Tensor] = {}

    def train_forward() -> None:
        state["logits"] = model(tokens)

    def loss() -> None:
        state["loss"] = loss_fn(state.pop("logits").reshape(-1, config.vocab), targets.reshape(-1))

    phases: list[tuple[str, Callable[[], object]]] = [
        ("zero_grad", lambda: optimizer.zero_grad(set_to_none=True)),
        ("forward", train_forward),
        ("loss", loss),
        ("backward", lambda: state.pop("loss").backward()),
        ("optimizer", optimizer.step),
    ]
    return Workload(variant, "lm", config.as_dict(), "fp32", config.timesteps, forward, phases, phase)
