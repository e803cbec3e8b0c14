"""Framework overhead against the native baseline: ratios, pairwise differences, and the excess explained.

Inputs are manifest rows (``tracekit.manifest``) of framework runs and native baseline runs,
joined by device and LSTM shape (hidden, batch, timesteps, input; one layer), plus the event
tables of the framework runs' traces, keyed by run_id.

For each framework run with a trace, the excess over the baseline, E = T_framework - T_native
(unprofiled medians), is split with the trace's per-step breakdown, scaled so the parts add up
to E exactly (the profiler stretches every step; its shares are kept, its absolute time is not):

- CPU: s = T_framework / (trace step span); casts = s * cast-op time; extra compute =
  s * (other compute-op time) - T_native; dispatch = s * (step time outside compute ops: framework
  dispatch, and any waiting or batch fetching the breakdown tells apart).
- GPU: s = T_framework / (GPU span per step); casts = s * cast-kernel time; extra compute =
  s * (other kernel time) - T_native; launch gaps / idle = s * GPU idle time.

A negative extra compute means the framework's kernels or ops beat the baseline's (oneDNN's fused
CPU LSTM does beat a BLAS loop).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa

from tracekit.analyze.breakdown import breakdown

SHAPE = ("hidden", "batch", "timesteps", "input")
# Pairs the studies compared (A, B): "B vs A" in the mean-difference table, where both ran.
PAIRS: tuple[tuple[str, str], ...] = (
    ("native/cudnn_lstm", "torch/nn_lstm"), ("native/cpu_blas", "torch/nn_lstm"),
    ("native/cudnn_lstm", "native/cublas_lstm"),
    ("torch/nn_lstm", "torch/nn_lstm_amp"), ("torch/nn_lstm", "torch/lstmcell_loop"),
    ("torch/custom_eager", "torch/custom_script"), ("torch/custom_eager", "torch/custom_compile"),
    ("native/cudnn_lstm", "tf/keras_lstm"), ("native/cpu_blas", "tf/keras_lstm"),
    ("tf/keras_lstm", "tf/keras_impl1"), ("tf/keras_lstm", "tf/keras_impl2"), ("tf/keras_lstm", "tf/keras_eager"),
    ("tf/keras_lstm", "tf/keras_mixed"), ("tf/keras_lstm", "tf/block_lstm"), ("torch/nn_lstm", "tf/keras_lstm"),
)
# Profilers whose traces hold the framework's ops (nsys CPU traces hold only ranges), in order of
# preference for the decomposition: level-3 TF traces see every op, level 2 only the costly ones.
TRACED_PROFILERS = ("torch", "tf-host3", "tf", "tf-python")


def decomposable(row: Mapping[str, Any]) -> bool:
    """A finished one-layer LSTM run whose trace can explain its excess over the baseline."""
    return (row.get("status") == "ok" and bool(row.get("traces")) and row.get("profiler") in TRACED_PROFILERS
            and row.get("variant_group") == "layer" and row["config"].get("layers", 1) == 1)


def _preference(row: Mapping[str, Any]) -> int:
    profiler = row["profiler"]
    return TRACED_PROFILERS.index(profiler) if profiler in TRACED_PROFILERS else len(TRACED_PROFILERS)


@dataclass
class OverheadReport:
    """Result of ``overhead()``. Times in ns.

    runs: one row per framework run (framework, variant, device, dtype, shape): ``time_ns``,
        ``baseline`` (native variant), ``baseline_ns``, ``ratio`` (time / baseline), ``excess_ns``;
        where a trace was given: ``cast_ns``, ``extra_compute_ns``, ``dispatch_ns`` (CPU: outside
        compute ops; GPU: GPU idle, i.e. launch gaps) and ``parts_ns`` (their sum, = excess_ns).
    pairs: per (a, b): ``configs`` in common, ``mean_diff_pct`` (mean of (t_b - t_a) / t_a),
        ``mean_abs_pct`` (mean of |t_b - t_a| / t_a), ``geomean_ratio`` (t_b / t_a).
    trends: per (variant, axis, value): ``ratio`` to the baseline, for the plots.
    unmatched: framework runs with no baseline of the same shape and device, and why.
    """

    runs: pd.DataFrame
    pairs: pd.DataFrame
    trends: pd.DataFrame
    unmatched: list[str] = field(default_factory=list)


def run_time_ns(row: Mapping[str, Any]) -> float | None:
    """The run's step time: CUDA-event median on GPU when measured, else the wall-clock median."""
    timing = row.get("timing") or {}
    for key in ("cuda_event_ns", "wall_ns"):
        median = (timing.get(key) or {}).get("median")
        if median:
            return float(median)
    return None


def _key(row: Mapping[str, Any]) -> tuple:
    c = row["config"]
    return (row["device"], *(c.get(k) for k in SHAPE))


def _runs(rows: Sequence[Mapping[str, Any]]) -> dict[tuple, Mapping[str, Any]]:
    """One row per (framework/variant, device, dtype, shape): the traced one when there is one."""
    best: dict[tuple, Mapping[str, Any]] = {}
    for row in rows:
        if row.get("status") != "ok" or run_time_ns(row) is None or not row.get("config"):
            continue
        k = (f"{row['framework']}/{row['variant']}", row["dtype"], *_key(row))
        if k not in best or _preference(row) < _preference(best[k]):
            best[k] = row
    return best


def _baseline_for(device: str) -> str:
    return "native/cudnn_lstm" if device == "cuda" else "native/cpu_blas"


def overhead(rows: Sequence[Mapping[str, Any]], tables: Mapping[str, pa.Table] | None = None) -> OverheadReport:
    """Join framework runs with native runs of the same shape; see the module doc for the parts."""
    tables = tables or {}
    runs = _runs(rows)
    native = {(k[1], *k[2:]): (k[0], row) for k, row in runs.items() if k[0] == _baseline_for(k[2])}
    records, unmatched = [], []
    for k, row in runs.items():
        name, dtype, device = k[0], k[1], k[2]
        if name.startswith("native/"):
            continue
        if row["config"].get("layers", 1) != 1 or "vocab" in row["config"]:
            continue  # the baseline is one layer: stacked and LM runs have no native counterpart
        base = native.get((dtype, *k[2:])) or native.get(("fp32", *k[2:]))
        if base is None:
            unmatched.append(f"{row['run_id']}: no {_baseline_for(device)} run of this shape")
            continue
        t, tb = run_time_ns(row), run_time_ns(base[1])
        assert t is not None and tb is not None
        rec: dict[str, Any] = {"framework": row["framework"], "variant": row["variant"], "device": device, "dtype": dtype,
                               **{s: row["config"][s] for s in SHAPE}, "time_ns": t, "baseline": base[0],
                               "baseline_dtype": base[1]["dtype"], "baseline_ns": tb, "ratio": t / tb,
                               "excess_ns": t - tb, "run_id": row["run_id"]}
        table = tables.get(row["run_id"])
        if table is not None:
            rec.update(decompose(table, t, tb))
        records.append(rec)
    frame = pd.DataFrame.from_records(records)
    return OverheadReport(frame, _pairs(runs), _trends(frame), unmatched)


def decompose(table: pa.Table, time_ns: float, baseline_ns: float) -> dict[str, float]:
    """The excess ``time_ns - baseline_ns`` as casts + extra compute + dispatch/idle (module doc)."""
    bd = breakdown(table)
    steps = max(1, len(bd.steps))
    if bd.has_gpu:
        whole = bd.gpu[bd.gpu.step == -1].sum(numeric_only=True)
        span, cast = float(whole["span_ns"]), float(whole["cast_ns"])
        compute, gaps = float(whole["busy_ns"]), float(whole["idle_ns"])
    else:
        whole = bd.cpu_ops[bd.cpu_ops.step == -1].iloc[0]
        span, compute = float(whole["span_ns"]), float(whole["compute_ns"])
        gaps = span - compute  # dispatch, and any waiting or batch fetching: all outside compute ops
        cast = min(float(whole["cast_ns"]), compute)
    if span <= 0:
        return {}
    scale = time_ns / (span / steps)
    parts = {"cast_ns": scale * cast / steps, "extra_compute_ns": scale * (compute - cast) / steps - baseline_ns,
             "dispatch_ns": scale * gaps / steps}
    parts["parts_ns"] = sum(parts.values())
    return parts


def _matched_times(a: Mapping[tuple, Mapping[str, float]], b: Mapping[tuple, Mapping[str, float]]) -> list[tuple[float, float]]:
    """(time of A, time of B) per common shape and dtype. Runs of different dtypes pair only when each
    side ran one dtype at that shape (AMP against fp32 is a pair; native fp16 against nn.LSTM fp32 is
    not, when native fp32 ran too)."""
    pairs = []
    for shape in sorted(set(a) & set(b)):
        same = sorted(set(a[shape]) & set(b[shape]))
        if same:
            pairs += [(a[shape][d], b[shape][d]) for d in same]
        elif len(a[shape]) == 1 and len(b[shape]) == 1:
            pairs.append((next(iter(a[shape].values())), next(iter(b[shape].values()))))
    return pairs


def _pairs(runs: Mapping[tuple, Mapping[str, Any]]) -> pd.DataFrame:
    by_name: dict[str, dict[tuple, dict[str, float]]] = {}  # name -> (device, shape) -> dtype -> time
    for k, row in runs.items():
        t = run_time_ns(row)
        if t:
            by_name.setdefault(k[0], {}).setdefault(k[2:], {})[k[1]] = t
    records = []
    for a, b in PAIRS:
        matched = _matched_times(by_name.get(a, {}), by_name.get(b, {}))
        if not matched:
            continue
        diffs = [(tb - ta) / ta for ta, tb in matched]
        ratios = [tb / ta for ta, tb in matched]
        records.append({"a": a, "b": b, "configs": len(matched), "mean_diff_pct": 100 * sum(diffs) / len(diffs),
                        "mean_abs_pct": 100 * sum(abs(d) for d in diffs) / len(diffs),
                        "geomean_ratio": math.exp(sum(math.log(r) for r in ratios) / len(ratios))})
    return pd.DataFrame.from_records(records, columns=["a", "b", "configs", "mean_diff_pct", "mean_abs_pct", "geomean_ratio"])


def _trends(runs: pd.DataFrame) -> pd.DataFrame:
    """Ratio against each axis, holding the other axes at their most common values (one-factor sweeps)."""
    if runs.empty:
        return pd.DataFrame(columns=["variant", "device", "axis", "value", "ratio"])
    records = []
    for axis in ("hidden", "batch", "timesteps"):
        others = [s for s in SHAPE if s not in (axis, "input")]  # input follows hidden in the presets
        fixed = runs[others].mode().iloc[0]
        sel = runs[(runs[others] == fixed).all(axis=1)]
        if sel[axis].nunique() < 2:
            continue  # the sweep did not vary this axis
        for _, r in sel.iterrows():
            records.append({"variant": f"{r.framework}/{r.variant}", "device": r.device, "axis": axis,
                            "value": int(r[axis]), "ratio": float(r.ratio)})
    out = pd.DataFrame.from_records(records, columns=["variant", "device", "axis", "value", "ratio"])
    return out.drop_duplicates(["variant", "device", "axis", "value"]).sort_values(["axis", "variant", "value"]).reset_index(drop=True)
