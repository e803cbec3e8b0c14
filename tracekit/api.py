"""The Python API: the same analyses as the CLI subcommands, with the same parameters.

Each function takes a trace (a path to any supported file, or an event table from
``tracekit.load``) and returns the analysis dataclass; ``render(result, fmt)`` gives the text the
CLI would print. Units: every ``*_ns`` column or field is integer nanoseconds.

    import tracekit
    r = tracekit.report("trace.json.gz")          # Report: .breakdown, .launch
    r.breakdown.gpu                               # pandas DataFrame, one row per (device, step)
    print(tracekit.render(r, "markdown"))
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

import pyarrow as pa

from tracekit import threads
from tracekit.analyze.breakdown import Breakdown, breakdown
from tracekit.analyze.classify import classify_rows
from tracekit.analyze.compare import Comparison
from tracekit.analyze.compare import compare as _compare
from tracekit.analyze.critical_path import CriticalPath
from tracekit.analyze.frame import frame_of
from tracekit.analyze.launch import LaunchReport
from tracekit.analyze.launch import launch as _launch
from tracekit.analyze.overhead import OverheadReport, decomposable
from tracekit.analyze.overhead import overhead as _overhead
from tracekit.analyze.ranges import RangesReport
from tracekit.analyze.ranges import ranges as _ranges
from tracekit.analyze.whatif import WhatIf
from tracekit.errors import UsageError
from tracekit.ingest import NamedTable, load
from tracekit.render import documents, renderer
from tracekit.render.document import Document

Trace: TypeAlias = str | Path | pa.Table | NamedTable


@dataclass
class Report:
    """``tracekit report``: the breakdown and the launch verdict of one trace."""

    name: str
    table: pa.Table
    breakdown: Breakdown
    launch: LaunchReport


@dataclass
class Launch:
    name: str
    table: pa.Table
    result: LaunchReport


@dataclass
class Ranges:
    name: str
    table: pa.Table
    result: RangesReport


@dataclass
class CriticalPathResult:
    name: str
    table: pa.Table
    result: CriticalPath


@dataclass
class WhatIfResult:
    name: str
    table: pa.Table
    result: WhatIf


@dataclass
class Compare:
    names: list[str]
    result: Comparison


def _table(trace: Trace) -> tuple[str, pa.Table]:
    if isinstance(trace, pa.Table):
        return "<table>", trace
    if isinstance(trace, NamedTable):
        return trace.name, trace.table
    return str(trace), load(trace)


def report(trace: Trace, timesteps: int | None = None, exclude_last_step: bool = False, count_sync: bool = False,
           skip_steps: int = 0, keep_all_steps: bool = False) -> Report:
    """Time breakdown (GPU categories + idle, host, CPU ops) and launch verdict of one trace.

    The verdict leaves warm-up and outlier steps out (``tracekit.analyze.steps``) unless
    ``keep_all_steps``; ``skip_steps`` marks the first N steps warm-up.
    """
    name, table = _table(trace)
    classify_rows(frame_of(table))  # once, before the breakdown's thread and this one both read it
    bd = threads.start(breakdown, table, timesteps=timesteps, exclude_last_step=exclude_last_step, count_sync=count_sync)
    # The verdict reads the default breakdown; reuse this one when it is that.
    same = not exclude_last_step and not count_sync
    verdict = _launch(table, timesteps=timesteps, bd=bd if same else None, skip_steps=skip_steps,
                      keep_all_steps=keep_all_steps)
    return Report(name, table, bd.result(), verdict)


def launch(trace: Trace, short_kernel_ns: int = 10_000, idle_threshold: float = 0.3, timesteps: int | None = None,
           skip_steps: int = 0, keep_all_steps: bool = False) -> Launch:
    """Launch-overhead diagnosis of one trace (see ``tracekit.analyze.launch``)."""
    name, table = _table(trace)
    return Launch(name, table, _launch(table, short_kernel_ns=short_kernel_ns, idle_threshold=idle_threshold,
                                       timesteps=timesteps, skip_steps=skip_steps, keep_all_steps=keep_all_steps))


def ranges(trace: Trace) -> Ranges:
    """Time per NVTX / record_function / TraceMe range with GPU projection."""
    name, table = _table(trace)
    return Ranges(name, table, _ranges(table))


def critical_path(trace: Trace, range_name: str | None = None, instance: int | None = None) -> CriticalPathResult:
    """The critical path of one step (the first steady one by default) or of a named range's instance, and what
    bounds it (``tracekit.analyze.critical_path``)."""
    from tracekit.analyze.critical_path import critical_path as _critical_path

    name, table = _table(trace)
    return CriticalPathResult(name, table, _critical_path(table, range_name, instance))


def whatif(trace: Trace, range_name: str | None = None, instance: int | None = None) -> WhatIfResult:
    """The step (or range instance) replayed under each what-if scenario, ranked by predicted saving
    (``tracekit.analyze.whatif``)."""
    from tracekit.analyze.whatif import whatif as _whatif

    name, table = _table(trace)
    return WhatIfResult(name, table, _whatif(table, range_name, instance))


def compare(traces: list[Trace], labels: list[str] | None = None, fail_if: list[str] | None = None,
            skip_steps: int = 0, keep_all_steps: bool = False, step_times: dict[str, float] | None = None) -> Compare:
    """Compare traces against the first (see ``tracekit.analyze.compare`` for ``fail_if``); per-step
    figures use the steady steps of each trace unless ``keep_all_steps``."""
    loaded = [_table(t) for t in traces]
    return Compare([n for n, _ in loaded], _compare([t for _, t in loaded], labels, fail_if, skip_steps=skip_steps,
                                                    keep_all_steps=keep_all_steps, step_times=step_times))


@dataclass
class Overhead:
    sources: list[str]
    result: OverheadReport


def overhead(collections: list[str | Path]) -> Overhead:
    """Framework runs against native baseline runs of the same shape, from collection directories.

    Args:
        collections: directories with a ``manifest.jsonl`` (``tracekit collect`` / ``baseline``);
            framework and baseline runs may be in different ones.
    Returns:
        ``Overhead`` whose ``result`` is an ``OverheadReport`` (see its docstring for columns).
    """
    from tracekit.manifest import manifest_path, read_manifest

    rows, tables = [], {}
    for directory in collections:
        if not manifest_path(directory).exists():
            raise UsageError(f"{directory}: no manifest.jsonl (not a tracekit collection directory)")
        m = read_manifest(directory)
        for row in m.latest().values():
            rows.append(row)
            if decomposable(row):
                tables[row["run_id"]] = load(m.trace_paths(row)[0])
    return Overhead([str(c) for c in collections], _overhead(rows, tables))


def document(result: Report | Launch | Ranges | Compare | Overhead | CriticalPathResult | WhatIfResult) -> Document:
    """The document a result renders as."""
    if isinstance(result, Report):
        return documents.report_document(result.name, documents.facts(result.table, result.name), result.breakdown, result.launch)
    if isinstance(result, Launch):
        return documents.launch_document(result.name, documents.facts(result.table, result.name), result.result)
    if isinstance(result, Ranges):
        return documents.ranges_document(result.name, documents.facts(result.table, result.name), result.result)
    if isinstance(result, Compare):
        return documents.compare_document(result.names, result.result)
    if isinstance(result, WhatIfResult):
        return documents.whatif_document(result.name, documents.facts(result.table, result.name), result.result)
    if isinstance(result, CriticalPathResult):
        return documents.critical_path_document(result.name, documents.facts(result.table, result.name), result.result)
    if isinstance(result, Overhead):
        from tracekit.render.overhead_document import overhead_document

        return overhead_document(result.sources, result.result)
    raise UsageError(f"cannot render {type(result).__name__}")


def render(result: Report | Launch | Ranges | Compare | Overhead | CriticalPathResult | WhatIfResult, fmt: str = "terminal") -> str:
    """Text of a result in one format: terminal, markdown, json or html."""
    return renderer(fmt).render(document(result))
