"""A variant at one config, ready to run: what every framework's collector hands the runner."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tracekit.collectors.phases import nvtx_range

RangeFactory = Callable[[str], contextlib.AbstractContextManager[Any]]


@dataclass
class Workload:
    """``step()`` runs one step: each phase inside ``phase_range(name)`` (the framework's profiler
    range and an NVTX range), the whole inside an NVTX ``step#N`` range, optionally inside the
    profiler's own step marker (``step_range(N)``)."""

    variant: str
    group: str  # "layer" or "lm"
    config: dict[str, int]
    dtype: str
    timesteps: int
    forward: Callable[[], Any]  # the output, for agreement checks (no ranges)
    phases: list[tuple[str, Callable[[], object]]]
    phase_range: RangeFactory
    step_range: Callable[[int], contextlib.AbstractContextManager[Any]] | None = None
    steps_done: int = field(default=0)

    def step(self) -> None:
        marker = self.step_range(self.steps_done) if self.step_range else contextlib.nullcontext()
        with marker, nvtx_range(f"step#{self.steps_done}"):
            for name, run in self.phases:
                with self.phase_range(name):
                    run()
        self.steps_done += 1
