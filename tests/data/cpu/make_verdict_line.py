"""Writes tests/data/cpu/verdict_line_{a,b}.pt.trace.json.gz: two real torch.profiler captures (CPU,
shapes recorded, 3 steps marked) of one loop, an MLP (256 -> 512 -> 10) trained with SGD on batches of
64, whose step spends about half its time outside compute ops: captured until one capture's share
is at least 50% (CPU/framework-bound) and another's below it (CPU compute-bound), the first such pair
kept. Two captures of one program then carry different verdicts that differ by a few points of the
step, which compare says.

    python tests/data/cpu/make_verdict_line.py
Made with torch 2.13.0 (CPU build) on a 2-core Intel Xeon (AVX-512, AMX); the kept pair: 55% and 49.9%.
"""

import shutil
import sys
from pathlib import Path

import torch
from profiled import HERE, write_training_capture

sys.path.insert(0, str(HERE.parents[2]))
from tracekit import api  # noqa: E402


def main() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), 0.01)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    kept: dict[str, Path] = {}
    for attempt in range(40):
        path = write_training_capture(f"verdict_line_try{attempt}", model, opt, x, y, active=3)
        verdict = api.launch(str(path)).result.verdict
        side = {"CPU/framework-bound": "a", "CPU compute-bound": "b"}.get(verdict)
        if side and side not in kept:
            kept[side] = path
        else:
            path.unlink()
        if len(kept) == 2:
            break
    if len(kept) < 2:
        raise SystemExit(f"no pair straddling the line in {attempt + 1} captures: {sorted(kept)}")
    for side, path in kept.items():
        shutil.move(path, HERE / f"verdict_line_{side}.pt.trace.json.gz")


if __name__ == "__main__":
    main()
