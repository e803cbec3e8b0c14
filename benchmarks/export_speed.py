"""Export speed and memory against ingest, on real traces of each source format.

    python benchmarks/export_speed.py

For each trace: ingest time (the source file to the event table), export time (the table to Kineto
JSON, uncompressed and gzip), and the export of the same trace streamed from its tracekit Parquet
file, whose peak memory is measured in a child process against reading the whole Parquet file.
Ratios are against ingest measured in the same run: export / ingest (target <= 1.5 uncompressed;
the two are both one pass over every event).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO.parent / "shared" / "traces"
SAMPLES = [
    "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "xprof/tf_bert_8xV100_gpu_multi_worker.xplane.pb",
    "nsys/abacus_pytorch_cnn_titanrtx_nsys2023.4.sqlite",
]

CHILD_PEAK = """
import json, resource, sys
from pathlib import Path
mode, parquet, out = sys.argv[1:4]
if mode == "stream":
    from tracekit.export.kineto_json import export_parquet
    export_parquet(Path(parquet), Path(out))
else:
    from tracekit.ingest import parquet as pq
    pq.read(Path(parquet))
print(json.dumps({"peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def _best(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def _peak(mode: str, parquet: Path, out: Path) -> int:
    run = subprocess.run([sys.executable, "-c", CHILD_PEAK, mode, str(parquet), str(out)], capture_output=True,
                         text=True, check=True)
    return int(json.loads(run.stdout)["peak_rss"])


def main() -> int:
    from tracekit.export.kineto_json import export_table
    from tracekit.ingest import load, parquet

    if not TRACES.is_dir():
        print(f"skipped: {TRACES} is absent")
        return 0
    print(f"{'trace':<48} {'events':>8} {'ingest s':>9} {'export s':>9} {'ratio':>6} {'gz s':>7} "
          f"{'stream peak MB':>15} {'read-all peak MB':>17}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for rel in SAMPLES:
            path = TRACES / rel
            ingest_s = _best(lambda path=path: load(path))
            table = load(path)
            export_s = _best(lambda table=table: export_table(table, tmp / "e.json"))
            gz_s = _best(lambda table=table: export_table(table, tmp / "e.json.gz"), repeats=1)
            pq_path = tmp / "t.parquet"
            parquet.write(table, pq_path, force=True)
            stream_peak = _peak("stream", pq_path, tmp / "s.json")
            read_peak = _peak("read", pq_path, tmp / "s.json")
            print(f"{Path(rel).name[:48]:<48} {table.num_rows:>8,} {ingest_s:>9.3f} {export_s:>9.3f} "
                  f"{export_s / ingest_s:>6.2f} {gz_s:>7.3f} {stream_peak / 2**20:>15.0f} {read_peak / 2**20:>17.0f}")
        _big(tmp)
    return 0


def _big(tmp: Path, copies: int = 15) -> None:
    """Streaming keeps memory flat: a ~1M-event Parquet file made of copies of a real trace (row
    links shifted per copy), exported streamed, against reading it whole."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from tracekit.ingest import load, parquet

    one = load(TRACES / SAMPLES[0])
    parts = []
    for k in range(copies):
        part = one
        for col in ("parent", "launch_row", "op_row"):
            i = part.schema.get_field_index(col)
            part = part.set_column(i, col, pc.add(part.column(col), pa.scalar(k * one.num_rows, pa.int64())))
        parts.append(part)
    big = pa.concat_tables(parts)
    path = tmp / "big.parquet"
    parquet.write(big, path, force=True)
    del parts, big
    t = time.perf_counter()
    stream_peak = _peak("stream", path, tmp / "big.json")
    stream_s = time.perf_counter() - t
    read_peak = _peak("read", path, tmp / "big.json")
    print(f"\n{one.num_rows * copies:,} events from Parquet: streamed export {stream_s:.1f} s (child process), "
          f"peak {stream_peak / 2**20:.0f} MB; reading the table whole peaks at {read_peak / 2**20:.0f} MB "
          f"(ratio {stream_peak / read_peak:.2f})")


if __name__ == "__main__":
    sys.exit(main())
