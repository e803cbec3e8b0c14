"""The study's per-run table: for every traced run of ``tracekit run``, its time, ops per timestep
and where the time goes, as shares that add up to 100%, with the launch verdict.

On a GPU study the shares are exclusive GPU time by kernel class plus idle, of the GPU span; on a
CPU study they are the exclusive split of the step span on the step's thread
(``tracekit.analyze.cpu_partition``) plus time outside ops.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracekit.analyze.breakdown import Breakdown
from tracekit.analyze.classify import KERNEL_CLASSES
from tracekit.analyze.launch import LaunchReport
from tracekit.analyze.overhead import run_time_ns

# Parts of the exclusive CPU split shown per run; with "outside ops" they add to 100%.
CPU_CLASSES = ("rnn", "gemm", "elementwise", "cast", "reduction", "compiled", "framework")
GPU_CLASSES = ("rnn", "gemm", "elementwise", "cast", "memcpy", "other")


@dataclass
class StudyFacts:
    directory: str
    preset: str
    device: str
    device_name: str
    wall_s: float
    runs_ok: int
    runs_not_ok: list[dict[str, str]]  # {"run_id", "status" (failed | skipped), "reason"}
    runs_reused: int
    notes: list[str] = field(default_factory=list)


@dataclass
class VariantTable:
    """One row per traced run: framework, variant, profiler, dtype, shape, time_ns, ops_per_timestep,
    ``shares`` (one per class in ``classes``), rest (idle or outside ops), verdict."""

    gpu: bool
    classes: tuple[str, ...]
    rows: list[dict[str, Any]] = field(default_factory=list)


def variant_table(rows: Sequence[Mapping[str, Any]], breakdowns: Mapping[str, Breakdown],
                  launches: Mapping[str, LaunchReport]) -> VariantTable:
    """Time, ops per timestep, time shares by class and launch verdict of every traced run."""
    traced = [r for r in rows if r["run_id"] in breakdowns]
    gpu = any(breakdowns[r["run_id"]].has_gpu for r in traced)
    table = VariantTable(gpu, GPU_CLASSES if gpu else CPU_CLASSES)
    for r in sorted(traced, key=lambda r: (r["framework"], r["variant"], r["profiler"], sorted(r["config"].items()))):
        bd = breakdowns[r["run_id"]]
        c = r["config"]
        shape = f"h{c.get('hidden')} b{c.get('batch')} t{c.get('timesteps')}" + (f" v{c['vocab']}" if "vocab" in c else "")
        ops = bd.cpu_ops[bd.cpu_ops.step == -1]
        steps = max(1, len(bd.steps))
        ops_per_ts = float(ops.iloc[0]["ops"]) / steps / c["timesteps"] if len(ops) and c.get("timesteps") else None
        shares, rest = _shares(bd, table.classes, gpu)
        verdict = launches[r["run_id"]].verdict if r["run_id"] in launches else ""
        table.rows.append({"framework": r["framework"], "variant": r["variant"], "profiler": r["profiler"],
                           "dtype": r["dtype"], "shape": shape, "time_ns": run_time_ns(r), "ops_per_timestep": ops_per_ts,
                           "shares": shares, "rest": rest, "verdict": verdict})
    return table


def _shares(bd: Breakdown, classes: tuple[str, ...], gpu: bool) -> tuple[list[float], float | None]:
    if gpu and bd.has_gpu:
        whole = bd.gpu[bd.gpu.step == -1].sum(numeric_only=True)
        span = float(whole["span_ns"]) or 1.0
        other = sum(float(whole[f"{k}_ns"]) for k in KERNEL_CLASSES if k not in GPU_CLASSES)
        return [(float(whole[f"{k}_ns"]) + (other if k == "other" else 0)) / span for k in classes], \
            float(whole["idle_ns"]) / span
    if len(bd.cpu_partition):
        part = bd.cpu_partition[bd.cpu_partition.step == -1].iloc[0]
        span = float(part["span_ns"]) or 1.0
        return [float(part.get(f"{k}_ns", 0)) / span for k in classes], float(part["outside_ops_ns"]) / span
    return [0.0] * len(classes), None
