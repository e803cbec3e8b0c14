"""Kineto ingest benchmark: tracekit vs orjson.loads on a ~1M-event trace made from a real one.

    python benchmarks/ingest_kineto.py [--events 1000000] [--keep DIR]

Builds the big trace by repeating the events of a real GPU trace from ../shared/traces (shifting
timestamps and ids so every copy is distinct), then runs each contender in a fresh child process
and prints wall time, CPU time and peak RSS, and the ratios the targets (issue 20) are stated in:
  tracekit ingest time / orjson.loads time (gc disabled)   target <= 0.5
  tracekit peak RSS / file size                            target <= 1.5
tracekit runs as the CLI does (numpy's OpenBLAS on one thread, the scanner on every core this
process may use), and once more on one thread (TRACEKIT_THREADS=1) to show the scaling.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STEP_PREFIX = "ProfilerStep#"
SEED = REPO.parent / "shared" / "traces" / "hta" / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"

CHILD_ORJSON = """
import gc, json, resource, sys, time, orjson
data = open(sys.argv[1], "rb").read()
gc.disable()
t = time.perf_counter(); doc = orjson.loads(data); dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "events": len(doc["traceEvents"]), "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""
CHILD_TRACEKIT = """
import json, resource, sys, time
from pathlib import Path
from tracekit.cli import import_numpy_with_one_blas_thread
from tracekit.pages import prefer_base_pages
import_numpy_with_one_blas_thread()  # as the tracekit command does
prefer_base_pages()
from tracekit import _native
from tracekit.ingest import kineto
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
t = time.perf_counter(); c = cpu(); table = kineto.read(Path(sys.argv[1])); dt = time.perf_counter() - t; dc = cpu() - c
print(json.dumps({"seconds": dt, "cpu_seconds": dc, "threads": _native.scan_threads(), "events": table.num_rows,
                  "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""
CHILD_BASELINE = """
import json, resource
from tracekit.ingest import kineto  # noqa: F401  (interpreter + numpy + pyarrow, nothing read)
print(json.dumps({"peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def synthesize(seed: Path, events: int, out: Path) -> int:
    """Write a Kineto-style JSON with about ``events`` events; returns the exact count."""
    doc = json.loads(gzip.decompress(seed.read_bytes()))
    base = doc["traceEvents"]
    ts = [e["ts"] for e in base if "ts" in e]
    span = max(ts) - min(ts) + 1000.0
    copies = max(1, round(events / len(base)))
    # Each copy is later steps of the same loop (ProfilerStep#101..105, then #106..110, ...), as a long
    # profiling run records them: analyses see copies x the seed's steps, not 5 steps repeated.
    step_numbers = [int(e["name"][len(STEP_PREFIX):]) for e in base if str(e.get("name", "")).startswith(STEP_PREFIX)]
    steps_per_copy = (max(step_numbers) - min(step_numbers) + 1) if step_numbers else 0
    header = {k: v for k, v in doc.items() if k != "traceEvents"}
    n = 0
    with open(out, "w") as f:
        f.write("{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in header.items()) + ',\n  "traceEvents": [\n')
        first = True
        for c in range(copies):
            shift = c * span
            for e in base:
                e2 = dict(e)
                if c and steps_per_copy and str(e2.get("name", "")).startswith(STEP_PREFIX):
                    e2["name"] = f"{STEP_PREFIX}{int(e2['name'][len(STEP_PREFIX):]) + c * steps_per_copy}"
                if "ts" in e2:
                    e2["ts"] = round(e2["ts"] + shift, 3)
                if "id" in e2 and isinstance(e2["id"], int):
                    e2["id"] += c * 10_000_000
                if "args" in e2:
                    a = dict(e2["args"])
                    for k in ("correlation", "External id"):
                        if isinstance(a.get(k), int):
                            a[k] += c * 10_000_000
                    e2["args"] = a
                f.write(("" if first else ",\n") + "  " + json.dumps(e2))
                first = False
                n += 1
        f.write("\n  ]\n}\n")
    return n


def prepare_trace(events: int, keep: Path | None) -> tuple[tempfile.TemporaryDirectory | None, Path]:
    """The synthesized trace (made once, reused from ``keep`` when there), and the temp dir to clean."""
    tmp = tempfile.TemporaryDirectory() if keep is None else None
    work = Path(tmp.name) if tmp else keep
    assert work is not None
    work.mkdir(parents=True, exist_ok=True)
    trace = work / f"synthetic_{events}.json"
    if not trace.exists():
        print(f"synthesized {trace} ({synthesize(SEED, events, trace):,} events)")
    return tmp, trace


def child(code: str, *args: str, env: dict[str, str] | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True,
                          env={**os.environ, **(env or {})})
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, help="directory to keep the synthesized trace in (reused when present)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each contender; the best time is reported")
    args = ap.parse_args()
    if not SEED.exists():
        print(f"benchmark needs the real seed trace {SEED} (../shared is absent)", file=sys.stderr)
        return 1
    tmp, trace = prepare_trace(args.events, args.keep)
    size = trace.stat().st_size
    runs_o = [child(CHILD_ORJSON, str(trace)) for _ in range(args.repeat)]
    runs_t = [child(CHILD_TRACEKIT, str(trace)) for _ in range(args.repeat)]
    runs_1 = [child(CHILD_TRACEKIT, str(trace), env={"TRACEKIT_THREADS": "1"}) for _ in range(args.repeat)]
    base = child(CHILD_BASELINE)
    o = min(runs_o, key=lambda r: r["seconds"])
    t = min(runs_t, key=lambda r: r["seconds"])
    t1 = min(runs_1, key=lambda r: r["seconds"])
    t_rss = max(r["peak_rss"] for r in runs_t)
    mb = 1 << 20
    print(f"file: {size / mb:,.1f} MiB, {t['events']:,} events (orjson sees {o['events']:,})")
    print(f"orjson.loads (gc off): {o['seconds']:.2f} s, peak RSS {o['peak_rss'] / mb:,.0f} MiB")
    for label, r in ((f"tracekit, {t['threads']} threads", t), ("tracekit, 1 thread ", t1)):
        print(f"{label}: {r['seconds']:.2f} s wall, {r['cpu_seconds']:.2f} s CPU "
              f"({size / mb / r['cpu_seconds']:,.0f} MiB/s per core busy), {size / mb / r['seconds']:,.0f} MiB/s")
    print(f"peak RSS {t_rss / mb:,.0f} MiB (of which {base['peak_rss'] / mb:,.0f} MiB is the interpreter with numpy and pyarrow loaded)")
    print(f"time ratio  tracekit / orjson.loads = {t['seconds'] / o['seconds']:.2f}  (target <= 0.5; 1 thread: "
          f"{t1['seconds'] / o['seconds']:.2f})")
    print(f"memory ratio  tracekit peak RSS / file size = {t_rss / size:.2f}  (target <= 1.5)")
    if tmp:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
