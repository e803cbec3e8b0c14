"""nsys SQLite: tracekit's reader and reports against ``nsys stats`` on the same file, at scale.

    python benchmarks/nsys_ingest.py [--sizes kernels-100k,kernels-1m,nvtx-100k] [--nsys PATH]

The large files are made from real samples in ../shared/traces/nsys by replication: every CUDA
(kernel, copy, set, sync, runtime/driver API) and NVTX row is copied K times, each copy shifted in time
by the sample's span and given fresh correlation ids, so launch links and ranges stay valid.

* ``kernels-100k`` / ``kernels-1m``: the ABACUS PyTorch CNN sample (23,805 kernels, 34,670 API
  calls) x4 and x42. Reference: ``nsys stats -r cuda_gpu_kern_sum`` (target: ``tracekit report``
  within 2x its wall time, peak memory within 2x the file).
* ``nvtx-100k``: the nvFuser launch sample (21,463 NVTX ranges) x5. Reference:
  ``nsys stats -r nvtx_gpu_proj_sum`` against ``tracekit ranges`` (target: faster).

Wall time and peak RSS of each command (a child process, start-up included), best of 2; ratios
are tracekit / nsys measured in this run. nsys comes from PATH or ~/.cache/tracekit/nsys
(collectors/get_nsys.sh); without it only tracekit's numbers are printed.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRACES = Path(os.environ.get("TRACEKIT_SHARED", REPO.parent / "shared")) / "traces" / "nsys"
CACHED_NSYS = Path.home() / ".cache/tracekit/nsys/root/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64/nsys"
REPLICATED_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                     "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS",
                     "CUDNN_EVENTS", "CUBLAS_EVENTS")
CASES = {  # name: (sample, copies, tracekit command, nsys report)
    "kernels-100k": ("abacus_pytorch_cnn_titanrtx_nsys2023.4.sqlite", 4, "report", "cuda_gpu_kern_sum"),
    "kernels-1m": ("abacus_pytorch_cnn_titanrtx_nsys2023.4.sqlite", 42, "report", "cuda_gpu_kern_sum"),
    "nvtx-100k": ("nvfuser_launch1000_v100_nsys2023.4.sqlite", 5, "ranges", "nvtx_gpu_proj_sum"),
}


def replicate(sample: Path, copies: int, out: Path) -> dict[str, int]:
    """``copies`` copies of every CUDA/NVTX row of ``sample`` in ``out``; row counts per table."""
    shutil.copyfile(sample, out)
    os.chmod(out, 0o644)
    con = sqlite3.connect(out)
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    present = [t for t in REPLICATED_TABLES if t in have]
    lo, hi = con.execute(" UNION ALL ".join(f'SELECT min(start) AS a, max(coalesce("end", start)) AS b FROM "{t}"' for t in present)
                         .join(["SELECT min(a), max(b) FROM (", ")"])).fetchone()
    span = int(hi - lo) + 1
    corr_step = 1 + max(con.execute(f'SELECT coalesce(max(correlationId), 0) FROM "{t}"').fetchone()[0]
                        for t in present if "correlationId" in _columns(con, t))
    for t in present:
        cols = [c for c in _columns(con, t) if c not in _integer_keys(con, t)]
        original = con.execute(f'SELECT coalesce(max(rowid), 0) FROM "{t}"').fetchone()[0]
        for k in range(1, copies):
            shifted = [f'"{c}" + {k * span}' if c in ("start", "end") else
                       f'"{c}" + {k * corr_step}' if c == "correlationId" else f'"{c}"' for c in cols]
            con.execute(f'INSERT INTO "{t}" ({", ".join(chr(34) + c + chr(34) for c in cols)}) '
                        f'SELECT {", ".join(shifted)} FROM "{t}" WHERE rowid <= {original}')
    con.commit()
    counts = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in present}
    con.close()
    return counts


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f"PRAGMA table_info('{table}')")]


def _integer_keys(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info('{table}')") if r[5] and r[2].upper() == "INTEGER"}


def measure(cmd: list[str], repeats: int = 2) -> tuple[float, int]:
    """Best wall time (s) and its run's peak RSS (bytes) of a child process."""
    best = (float("inf"), 0)
    for _ in range(repeats):
        t = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True)
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
        peak = int(proc.stderr.strip().splitlines()[-1]) * 1024
        best = min(best, (wall, peak))
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(CASES), help="cases to run: " + ", ".join(CASES))
    parser.add_argument("--nsys", default=shutil.which("nsys") or (str(CACHED_NSYS) if CACHED_NSYS.exists() else None))
    args = parser.parse_args()
    if not TRACES.is_dir():
        print(f"skipped: {TRACES} is absent (the real samples live in ../shared)")
        return 0
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    print(f"machine: {cpu}, {os.cpu_count()} cores; nsys: {args.nsys or 'not found'}")
    # What any report pays before it reads a byte: the interpreter and the analysis stack (numpy,
    # pyarrow, pandas). Against a small file, this floor alone can exceed both targets.
    floor_wall, floor_peak = measure([sys.executable, "-c", "import tracekit.api"], repeats=3)
    print(f"start-up floor (python -c 'import tracekit.api'): {floor_wall:.2f} s, {floor_peak / 1e6:.0f} MB peak")
    print(f"{'case':<13} {'rows (kernels/API/NVTX)':>26} {'MB':>6} | {'tracekit s':>10} {'MB peak':>8} | "
          f"{'nsys s':>7} {'MB peak':>8} | {'time ratio':>10} {'peak/file':>9}")
    tracekit = [sys.executable, "-m", "tracekit"]
    with tempfile.TemporaryDirectory(prefix="tracekit-nsys-bench-") as tmp:
        for name in args.sizes.split(","):
            sample, copies, command, report = CASES[name]
            db = Path(tmp) / f"{name}.sqlite"
            counts = replicate(TRACES / sample, copies, db)
            size = db.stat().st_size
            out = Path(tmp) / f"{name}.md"
            tk_wall, tk_peak = measure([*tracekit, command, str(db), "-f", "markdown", "-o", str(out), "--force"])
            rows = "/".join(f"{counts.get(t, 0):,}" for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
                                                             "NVTX_EVENTS"))
            line = f"{name:<13} {rows:>26} {size / 1e6:>6.0f} | {tk_wall:>10.2f} {tk_peak / 1e6:>8.0f} | "
            if args.nsys:
                ns_wall, ns_peak = measure([args.nsys, "stats", "-q", "-r", report, "-f", "csv", "--force-export", "false", "--force-overwrite", "true",
                                            "-o", str(Path(tmp) / name), str(db)])
                line += f"{ns_wall:>7.2f} {ns_peak / 1e6:>8.0f} | {tk_wall / ns_wall:>10.2f} {tk_peak / size:>9.2f}"
            else:
                line += f"{'-':>7} {'-':>8} | {'-':>10} {tk_peak / size:>9.2f}"
            print(line, flush=True)
            db.unlink()
    print("time ratio = tracekit wall / nsys stats wall (target <= 2); peak/file = tracekit peak RSS / file size "
          "(target <= 2); both include the start-up floor above")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
