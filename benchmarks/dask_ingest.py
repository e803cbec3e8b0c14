"""Ingest 20 trace files into a dataset with 1 and with 2 Dask workers; print the speed-up.

    python benchmarks/dask_ingest.py [--files 20] [--source TRACE]

The files are 20 copies of a real Kineto trace (default: HTA's ns_resolution_trace, 68,692
events), each made distinct by one trailing byte so the dataset's content-hash dedupe does not
skip them. Both runs use the cluster ``tracekit ingest --engine dask`` starts
(``engine.local_cluster``: single-threaded worker processes that import the reader as they start),
started before the clock starts, so the figure is the ingest itself (hashing and parsing, both on
the workers); the reference is the 1-worker run, measured in the same invocation, interleaved with the 2-worker
runs; medians of --repeats (5). Target on a 2-core machine (issue 20): >= 1.8x.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tracekit import dataset, engine

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "traces" / "hta" / "ns_resolution_trace" / \
    "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


def make_files(source: Path, n: int, directory: Path) -> list[Path]:
    raw = gzip.decompress(source.read_bytes())
    files = []
    for i in range(n):
        path = directory / f"rank-{i}.trace.json"
        path.write_bytes(raw + b" " * (i + 1))  # distinct content, same events
        files.append(path)
    return files


def timed_ingest(files: list[Path], out: Path, workers: int) -> float:
    with engine.local_cluster(workers) as cluster:
        t0 = time.perf_counter()
        result = dataset.ingest(files, out, run="bench", engine="dask", scheduler=cluster.scheduler_address)
        elapsed = time.perf_counter() - t0
    assert len(result.added) == len(files) and not result.errors
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--source", type=Path, default=DEFAULT)
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per worker count (interleaved; median)")
    args = parser.parse_args()
    if not args.source.exists():
        print(f"{args.source} not found (../shared/traces beside the checkout, or pass --source)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="tk-dask-"))
    try:
        files = make_files(args.source, args.files, work)
        size = sum(f.stat().st_size for f in files) / 2**20
        print(f"{len(files)} files, {size:,.0f} MiB of JSON ({args.source.name})")
        times: dict[int, list[float]] = {1: [], 2: []}
        for i in range(args.repeats):  # interleaved, so load drift hits both alike
            for workers in (1, 2):
                times[workers].append(timed_ingest(files, work / f"ds{workers}-{i}", workers))
        one, two = statistics.median(times[1]), statistics.median(times[2])
        print(f"1 worker : {one:6.2f} s (median of {args.repeats}: {', '.join(f'{t:.2f}' for t in times[1])})")
        print(f"2 workers: {two:6.2f} s (median of {args.repeats}: {', '.join(f'{t:.2f}' for t in times[2])})")
        print(f"speed-up : {one / two:.2f}x (target >= 1.8x on 2 cores)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
