"""Profiler overhead per LSTM variant: step time under the profiler vs without, same process.

    python benchmarks/profiler_overhead.py [--framework torch|tf] [--preset quick] [--keep DIR]

Runs ``tracekit collect FRAMEWORK`` over the preset (or reuses DIR's finished runs) and prints, per
variant, the median over configs of (profiled step time / unprofiled step time), with the
framework ops per step and per timestep the trace holds. The reference, the unprofiled time, is
measured in the same run right before the profiled steps. Expect ~1.0-1.1 for the fused variants
and more for the fine-grained loops, whose every op is a profiler event (research note: 2-3 us
per event with record_shapes).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from tracekit import api, manifest
from tracekit.cli import main as tracekit_main


def _ops(path: Path, timesteps: int) -> tuple[float, int | None]:
    bd = api.report(path, timesteps=timesteps).breakdown
    whole = bd.cpu_ops[bd.cpu_ops.step == -1].iloc[0]
    return whole["ops"] / max(1, len(bd.steps)), bd.timesteps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=("torch", "tf"), default="torch")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--keep", metavar="DIR", help="collection directory to create or reuse")
    args = parser.parse_args()
    out = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tk-overhead-")) / "c"
    t0 = time.perf_counter()
    code = tracekit_main(["collect", args.framework, "--preset", args.preset, "-o", str(out), "--no-progress"])
    wall = time.perf_counter() - t0
    if code not in (0, 1):
        return code
    ratios: dict[str, list[float]] = defaultdict(list)
    ops: dict[str, list[tuple[float, int | None]]] = defaultdict(list)
    m = manifest.read_manifest(out)
    for row in m.latest().values():
        if row["status"] != "ok" or row["profiler"] != args.framework or row["framework"] != args.framework:
            continue
        ratios[row["variant"]].append(row["profiled_timing"]["wall_ns"]["median"] / row["timing"]["wall_ns"]["median"])
        ops[row["variant"]].append(_ops(m.trace_paths(row)[0], row["config"]["timesteps"]))
    print(f"\n{args.framework}, preset {args.preset}: collect took {wall:,.1f} s ({out})")
    print(f"{'variant':22} {'runs':>4} {'profiled/unprofiled':>20} {'range':>13} {'ops/step':>9} {'ops/timestep':>12}")
    for variant, values in ratios.items():
        per_step = statistics.median(o for o, _ in ops[variant])
        per_ts = statistics.median(o / t for o, t in ops[variant] if t)
        print(f"{variant:22} {len(values):4d} {statistics.median(values):20.2f} "
              f"{min(values):6.2f}-{max(values):<6.2f} {per_step:9.1f} {per_ts:12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
