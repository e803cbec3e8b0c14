"""Windowed Kineto ingest benchmark: memory bounded by the window, not the file (issue 20, target 5).

    python benchmarks/ingest_windows.py [--events 1000000 5000000] [--window-mb 64 256] [--keep DIR]

For each trace size (made from a real trace, as benchmarks/ingest_kineto.py makes it), runs in
fresh child processes, all writing the same Parquet file:
  whole file   tracekit ingest TRACE -o X.parquet --window-mb 0  (kineto.read, then write)
  windows      tracekit ingest TRACE -o X.parquet --window-mb N  (kineto_windows.write_parquet)
and orjson.loads of the file as the time reference. Prints wall time, peak RSS, and the ratios:
  peak RSS / file size        whole file ~1.7; windows: a window term plus ~70 bytes an event
  windows time / whole time   the price of reading the file twice
A trace bigger than RAM/4 ingests when the windowed peak stays well under RAM: the peak of the
largest trace here, in file sizes, says how big a trace fits in this machine's memory.
--unmarked renames the trace's ProfilerStep#N ranges train_step, so that it marks no steps and
both readers infer them from the range's calls: the windowed ingest then reads the written file's
columns inference needs and writes the file again (kineto_windows._infer_steps).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest_kineto import CHILD_ORJSON, SEED, child, prepare_trace  # noqa: E402

CHILD_INGEST = """
import json, resource, sys, time
from pathlib import Path
from tracekit.cli import main
t = time.perf_counter()
rc = main(["ingest", sys.argv[1], "-o", sys.argv[2], "--force", "--window-mb", sys.argv[3]])
dt = time.perf_counter() - t
assert rc == 0
print(json.dumps({"seconds": dt, "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""
CHILD_UNMARK = """
import re, sys
from pathlib import Path
Path(sys.argv[2]).write_bytes(re.sub(rb"ProfilerStep#\\d+", b"train_step", Path(sys.argv[1]).read_bytes()))
"""
CHILD_SAME = """
import sys, pyarrow.parquet as pq
a, b = pq.read_table(sys.argv[1]), pq.read_table(sys.argv[2])
print('{"same": %s, "rows": %d}' % ("true" if a.equals(b) and a.schema.metadata == b.schema.metadata else "false", a.num_rows))
"""


def machine_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, nargs="+", default=[1_000_000, 5_000_000])
    ap.add_argument("--window-mb", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--keep", type=Path, help="directory to keep the synthesized traces in (reused when present)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each contender; the best time is reported")
    ap.add_argument("--unmarked", action="store_true", help="the trace without step markers (steps inferred)")
    args = ap.parse_args()
    if not SEED.exists():
        print(f"benchmark needs the real seed trace {SEED} (../shared is absent)", file=sys.stderr)
        return 1
    mb = 1 << 20
    print(f"machine memory {machine_memory() / mb / 1024:.1f} GiB, {os.cpu_count()} cores")
    print(f"{'events':>10} {'file MiB':>9} {'contender':>18} {'wall s':>7} {'peak MiB':>9} {'peak/file':>9} "
          f"{'time/whole':>10}")
    peaks: dict[int, list[tuple[int, int, int]]] = {}  # window -> [(events, file bytes, peak)]
    for events in args.events:
        tmp, trace = prepare_trace(events, args.keep)
        if args.unmarked:
            unmarked = trace.with_name(f"unmarked_{trace.name}")
            if not unmarked.exists():  # in a child: a child inherits its parent's peak RSS, which it reports
                subprocess.run([sys.executable, "-c", CHILD_UNMARK, str(trace), str(unmarked)], check=True)
            trace = unmarked
        size = trace.stat().st_size
        out_dir = trace.parent
        o = min((child(CHILD_ORJSON, str(trace)) for _ in range(args.repeat)), key=lambda r: r["seconds"])
        rows = [("orjson.loads", o)]
        whole_out = out_dir / f"whole_{events}.parquet"
        whole = min((child(CHILD_INGEST, str(trace), str(whole_out), "0") for _ in range(args.repeat)),
                    key=lambda r: r["seconds"])
        rows.append(("whole file", whole))
        for window in args.window_mb:
            out = out_dir / f"windows_{window}_{events}.parquet"
            runs = [child(CHILD_INGEST, str(trace), str(out), str(window)) for _ in range(args.repeat)]
            best = min(runs, key=lambda r: r["seconds"])
            best["peak_rss"] = max(r["peak_rss"] for r in runs)
            same = child(CHILD_SAME, str(whole_out), str(out))
            if not same["same"]:
                print(f"windows of {window} MiB gave a different table than the whole file", file=sys.stderr)
                return 1
            out.unlink()
            rows.append((f"windows {window} MiB", best))
            peaks.setdefault(window, []).append((events, size, best["peak_rss"]))
        whole_out.unlink()
        for label, r in rows:
            print(f"{events:>10,} {size / mb:>9,.0f} {label:>18} {r['seconds']:>7.2f} {r['peak_rss'] / mb:>9,.0f} "
                  f"{r['peak_rss'] / size:>9.2f} {r['seconds'] / whole['seconds']:>10.2f}")
        if tmp:
            tmp.cleanup()
    print("tables: every windowed Parquet file equals the whole-file one (rows, columns and metadata)")
    for window, points in peaks.items():
        if len(points) < 2:
            continue
        # Peak = a fixed part (interpreter, window) + a part per event (the link facts and results).
        (e0, s0, p0), (e1, s1, p1) = points[0], points[-1]
        per_event = (p1 - p0) / (e1 - e0)
        fixed = p0 - per_event * e0
        file_per_event = (s1 - s0) / (e1 - e0)
        fits = (machine_memory() - fixed) / max(per_event, 1e-9) * file_per_event
        print(f"windows {window} MiB: peak = {fixed / mb:,.0f} MiB + {per_event:.0f} bytes an event "
              f"({file_per_event:.0f} bytes of JSON an event, {per_event / file_per_event:.2f}x the file): "
              f"a trace of ~{fits / mb / 1024:,.0f} GiB fits this machine's {machine_memory() / mb / 1024:.0f} GiB "
              f"(whole file: ~{machine_memory() / (whole['peak_rss'] / size) / mb / 1024:,.0f} GiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
