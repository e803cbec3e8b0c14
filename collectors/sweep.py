"""Sweep presets shared by every collector and the native baseline, so all run the same configs.

A config is one LSTM shape (hidden, batch, timesteps, input = hidden, layers). ``quick`` varies one
factor at a time around a centre and finishes in minutes on a 2-core CPU; ``paper`` is the full
grid of the studies (hidden 256-1024, batch 16-256, timesteps 50-1000) plus hidden 128, because
cuDNN's persistent kernel is used up to hidden 192 and per-step kernels above it
(research/torch_profiler.md section 7), so the grid must straddle that boundary.
The stacked language model has its own fixed shape per preset.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import product

from tracekit.errors import UsageError


@dataclass(frozen=True, order=True)
class LayerConfig:
    """One LSTM layer workload: sequence-major input [timesteps, batch, input]."""

    hidden: int
    batch: int
    timesteps: int
    input: int
    layers: int = 1

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class LMConfig:
    """The stacked LSTM language model of the TF/PyTorch/Julia comparison (embedding -> LSTM -> decoder)."""

    vocab: int = 10001
    embed: int = 128
    hidden: int = 256
    layers: int = 3
    timesteps: int = 50
    batch: int = 128

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    grids: tuple[dict[str, tuple[int, ...]], ...]
    lm: LMConfig
    warmup: int
    repeats: int
    lm_repeats: int
    profiled_steps: int

    def layer_configs(self, layers: int = 1) -> list[LayerConfig]:
        """Every config of the preset's grids, deduplicated, in a stable order."""
        seen: dict[LayerConfig, None] = {}
        for grid in self.grids:
            for hidden, batch, timesteps in product(grid["hidden"], grid["batch"], grid["timesteps"]):
                seen[LayerConfig(hidden=hidden, batch=batch, timesteps=timesteps, input=hidden, layers=layers)] = None
        return list(seen)


def _one_at_a_time(centre: dict[str, int], axes: dict[str, tuple[int, ...]]) -> tuple[dict[str, tuple[int, ...]], ...]:
    grids = []
    for axis, values in axes.items():
        grid: dict[str, tuple[int, ...]] = {k: (v,) for k, v in centre.items()}
        grid[axis] = values
        grids.append(grid)
    return tuple(grids)


PRESETS: dict[str, Preset] = {
    "tiny": Preset(
        name="tiny", description="seconds: for tests and smoke runs",
        grids=_one_at_a_time({"hidden": 16, "batch": 2, "timesteps": 5}, {"timesteps": (5, 10)}),
        lm=LMConfig(vocab=101, embed=8, hidden=16, layers=2, timesteps=5, batch=4),
        warmup=2, repeats=3, lm_repeats=2, profiled_steps=2),
    "quick": Preset(
        name="quick", description="minutes on a 2-core CPU: one factor at a time around hidden 256, batch 16, 20 timesteps",
        grids=_one_at_a_time({"hidden": 256, "batch": 16, "timesteps": 20},
                             {"hidden": (128, 256), "batch": (16, 64), "timesteps": (10, 20)}),
        lm=LMConfig(), warmup=3, repeats=10, lm_repeats=3, profiled_steps=3),
    "hidden": Preset(
        name="hidden", description="hidden 128-1024 at batch 64, 100 timesteps: cuDNN's algorithm boundary near "
        "hidden 192 and the cuBLAS-vs-cuDNN gap at large hidden (for a GPU)",
        grids=({"hidden": (128, 192, 256, 512, 1024), "batch": (64,), "timesteps": (100,)},),
        lm=LMConfig(), warmup=3, repeats=10, lm_repeats=3, profiled_steps=3),
    "paper": Preset(
        name="paper", description="the studies' grid: hidden 128-1024 x batch 16-256 x timesteps 50-1000 (for a GPU)",
        grids=({"hidden": (128, 256, 512, 1024), "batch": (16, 64, 256), "timesteps": (50, 200, 1000)},),
        lm=LMConfig(), warmup=5, repeats=20, lm_repeats=10, profiled_steps=3),
}


def preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UsageError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}") from None
