"""The nightly-style fuzz run: many more inputs than CI's 20,000 per parser.

    python benchmarks/fuzz_long.py [N]   # default 200,000 per parser

Runs tests/fuzz/sanitized_scan.py (the C Kineto scanner under ASan+UBSan) and tests/fuzz/reader_fuzz.py
(XSpace, nsys) with N inputs each and a seed that differs per run (the date), so successive nights
cover new inputs; prints each summary line and the inputs per second.
"""

from __future__ import annotations

import datetime
import subprocess
import sys
import time
from pathlib import Path

FUZZ = Path(__file__).resolve().parents[1] / "tests" / "fuzz"


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    seed = int(datetime.date.today().strftime("%Y%m%d"))
    status = 0
    for cmd in ([str(FUZZ / "sanitized_scan.py"), str(n)], [str(FUZZ / "reader_fuzz.py"), "xspace", str(n)],
                [str(FUZZ / "reader_fuzz.py"), "nsys", str(n)]):
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, *cmd, "--seed", str(seed)], capture_output=True, text=True)
        wall = time.perf_counter() - started
        print(f"{proc.stdout.strip()}  [{n / wall:,.0f} inputs/s, seed {seed}]")
        if proc.returncode:
            sys.stderr.write(proc.stderr[-4000:])
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
