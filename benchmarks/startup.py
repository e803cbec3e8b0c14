"""Start-up: `tracekit --version` and `tracekit info` on a small trace, against a bare Python start.

    python benchmarks/startup.py

Medians of 7 runs each, in one run: the bare interpreter (`python -c pass`) is the reference, so
the printed ratio is what tracekit adds on this machine. Targets (issue 20): under 0.3 s each.

tracekit's bytecode is brought up to date first, as an install leaves it: with
PYTHONDONTWRITEBYTECODE=1 set (this project's machines set it) a checkout's edited modules keep
stale ``.pyc`` files and are compiled again at every start, 30 ms of `info`'s time (13 modules).
"""

from __future__ import annotations

import compileall
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SMALL = REPO / "tests" / "data" / "jax" / "scan_rnn.xplane.pb"  # 533 events, in the repo
SMALL_KINETO = REPO / "tests" / "data" / "h100" / "nn_lstm_amp-cuda-fp16-b64-h256-i256-l1-t20.pt.trace.json.gz"  # 561 events
SMALL_NSYS = REPO.parent / "shared" / "traces" / "nsys" / "dlprof_pytorch_cnn_rtx2070s_nsys2022.1.sqlite"  # 502 rows
RUNS = 7


def wall(cmd: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    package = REPO / "tracekit"
    if not compileall.compile_dir(str(package), quiet=1):
        print(f"could not compile {package}", file=sys.stderr)
        return 1
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("tracekit's bytecode compiled first (PYTHONDONTWRITEBYTECODE is set here, so starts would not update it)")
    bare = wall([sys.executable, "-c", "pass"])
    print(f"python -c pass (reference): {bare:.3f} s")
    commands = [("tracekit --version", ["--version"])]
    commands += [(f"tracekit info {path.name}", ["info", str(path)]) for path in (SMALL, SMALL_KINETO, SMALL_NSYS)
                 if path.exists()]  # the nsys export is read from ../shared when it is there
    for label, cmd in commands:
        t = wall([sys.executable, "-m", "tracekit", *cmd])
        print(f"{label}: {t:.3f} s ({t / bare:.1f}x the bare interpreter; target 0.3 s: "
              f"{'met' if t < 0.3 else 'not met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
