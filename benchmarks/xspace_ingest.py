"""XSpace ingest benchmark: tracekit's reader against protobuf's own parse of the same file.

    python benchmarks/xspace_ingest.py [--repeat 3]

For each XSpace trace under ../shared/traces (largest first) it prints the best-of-N time of
``tracekit.ingest.xplane.read`` and of ``XSpace.ParseFromString`` (the C upb decoder: the floor any
reader starts from), microseconds per event and their ratio; then the same reader with its C event
walker switched off (events read through protobuf's Python objects, as before the walker) and how
much faster the walker is. Issue 20's target: 10x faster than the reader of its filing (13-18 µs
per event on this 2-core EPYC).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO.parent / "shared" / "traces"


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    files = sorted(TRACES.glob("**/*.xplane.pb"), key=lambda p: -p.stat().st_size) if TRACES.is_dir() else []
    if not files:
        print(f"benchmark needs the XSpace traces under {TRACES} (../shared is absent)", file=sys.stderr)
        return 1
    from tracekit import _native
    from tracekit.ingest import xplane

    walker = _native.xplane_walker
    print(f"{'trace':48s} {'events':>7s} {'tracekit':>9s} {'µs/event':>8s} {'parse':>7s} {'ratio':>6s} "
          f"{'no walker':>9s} {'µs/event':>8s} {'speed-up':>8s}")
    for path in files[:8]:
        data = path.read_bytes()
        events = xplane.read(path).num_rows  # also warms imports and caches
        t_read = best(lambda: xplane.read(path), args.repeat)  # noqa: B023

        def parse() -> None:
            xplane.XSpace().ParseFromString(data)  # noqa: B023
        t_parse = best(parse, args.repeat)
        _native.xplane_walker = lambda: None  # type: ignore[assignment]
        try:
            t_python = best(lambda: xplane.read(path), args.repeat)  # noqa: B023
        finally:
            _native.xplane_walker = walker
        print(f"{path.name[:48]:48s} {events:7,d} {t_read:8.3f}s {t_read / events * 1e6:8.1f} {t_parse:6.3f}s "
              f"{t_read / t_parse:5.1f}x {t_python:8.3f}s {t_python / events * 1e6:8.1f} {t_python / t_read:7.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
