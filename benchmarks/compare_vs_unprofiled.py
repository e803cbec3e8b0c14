"""What `tracekit compare` says about two real captures, next to the same code timed without a profiler.

    python benchmarks/compare_vs_unprofiled.py

Two pairs, each captured with torch.profiler (record_shapes=True, as users profile) and timed
unprofiled in the same run: a GRUCell loop against nn.GRU (a real difference), and two captures of
the same GRUCell loop (no difference). Prints compare's findings, and the profiled ratio against the
unprofiled one (the profiler inflates fine-grained ops, so the profiled ratio overstates the gap).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

import tracekit

HIDDEN, BATCH, TIMESTEPS, STEPS = 256, 16, 50, 6


def gru_cell_loop() -> torch.nn.Module:
    cell = torch.nn.GRUCell(HIDDEN, HIDDEN)

    class Loop(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.zeros(x.shape[1], HIDDEN)
            for t in range(x.shape[0]):
                h = cell(x[t], h)
            return h

    return Loop()


def fused_gru() -> torch.nn.Module:
    gru = torch.nn.GRU(HIDDEN, HIDDEN)

    class Fused(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return gru(x)[0][-1]

    return Fused()


def unprofiled_ms(model: torch.nn.Module, x: torch.Tensor) -> float:
    with torch.no_grad():
        for _ in range(2):
            model(x)
        times = []
        for _ in range(STEPS):
            start = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def capture(model: torch.nn.Module, x: torch.Tensor, path: Path) -> Path:
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                                  schedule=schedule(wait=0, warmup=1, active=STEPS, repeat=1)) as prof:
        for _ in range(STEPS + 1):
            model(x)
            prof.step()
    prof.export_chrome_trace(str(path))
    return path


def main() -> int:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    x = torch.randn(TIMESTEPS, BATCH, HIDDEN)
    out = Path(tempfile.mkdtemp(prefix="tracekit-compare-"))
    loop, fused = gru_cell_loop(), fused_gru()
    pairs = {
        "GRUCell loop vs nn.GRU": ((fused, "nn_GRU"), (loop, "GRUCell_loop")),
        "two captures of the same GRUCell loop": ((loop, "capture_1"), (loop, "capture_2")),
    }
    for title, ((model_a, label_a), (model_b, label_b)) in pairs.items():
        a_ms, b_ms = unprofiled_ms(model_a, x), unprofiled_ms(model_b, x)
        a = capture(model_a, x, out / f"{label_a}.json")
        b = capture(model_b, x, out / f"{label_b}.json")
        result = tracekit.compare([a, b], labels=[label_a, label_b]).result
        m = result.metrics.set_index("metric")
        profiled = m.loc["step_time", label_b] / m.loc["step_time", label_a]
        print(f"== {title} (hidden {HIDDEN}, batch {BATCH}, {TIMESTEPS} timesteps, {STEPS} steps)")
        for sentence in result.findings[:6]:
            print(f"  compare: {sentence}")
        print(f"  unprofiled median: {label_a} {a_ms:.3f} ms, {label_b} {b_ms:.3f} ms, ratio {b_ms / a_ms:.2f}")
        print(f"  profiled ratio / unprofiled ratio: {profiled / (b_ms / a_ms):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
