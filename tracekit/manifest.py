"""The run manifest: one JSON line per collector or baseline run, read by ``overhead`` and ``run``.

A collection directory holds ``manifest.jsonl`` and the trace files its rows point to (paths
relative to the directory). Rows are appended only after a run's files are in place, so a
directory interrupted at any point is valid and a second ``collect`` skips what is done.

A row (``MANIFEST_VERSION`` 1), with units in key names::

    {"manifest_version": 1, "run_id": "torch/nn_lstm/cpu/fp32/h256-b16-t20/torch",
     "status": "ok",                      # ok | failed | skipped
     "framework": "torch", "framework_version": "2.13.0+cpu",
     "variant": "nn_lstm", "variant_group": "layer",   # layer | lm | baseline
     "device": "cpu", "device_name": "Intel Xeon ...", "dtype": "fp32", "threads": 1,
     "config": {"hidden": 256, "batch": 16, "timesteps": 20, "input": 256, "layers": 1},
     "profiler": "torch", "profiler_version": "kineto",
     "timing": {"wall_ns": {"median": ..., "p10": ..., "p90": ..., "min": ..., "n": 10},
                "cpu_ns": {...}, "warmup_s": 0.41, "method": "perf_counter"},
     "profiled_timing": {"wall_ns": {...}},
     "traces": ["traces/torch/nn_lstm/cpu-fp32-h256-b16-t20.pt.trace.json.gz"],
     "error": null, "notes": [], "host": "vm", "seed": 0, "preset": "quick",
     "finished_at": "2026-11-22T01:40:00Z"}
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracekit.errors import InputError

MANIFEST_VERSION = 1
MANIFEST_NAME = "manifest.jsonl"
STATUSES = ("ok", "failed", "skipped")


def run_id(framework: str, variant: str, device: str, dtype: str, config: dict[str, int], profiler: str) -> str:
    """Stable identity of one run: what a second ``collect`` compares to skip finished work."""
    sizes = "-".join(f"{key[0]}{config[key]}" for key in sorted(config))
    return f"{framework}/{variant}/{device}/{dtype}/{sizes}/{profiler}"


@dataclass(frozen=True)
class Manifest:
    """The rows of one collection directory; later rows for the same run_id replace earlier ones."""

    directory: Path
    rows: list[dict[str, Any]]

    def latest(self) -> dict[str, dict[str, Any]]:
        """run_id -> its last row (a retried failure is replaced by its success)."""
        return {row["run_id"]: row for row in self.rows}

    def finished(self) -> set[str]:
        """run_ids whose last row is ok or skipped: work a resumed collection does not repeat."""
        return {rid for rid, row in self.latest().items() if row.get("status") in ("ok", "skipped")}

    def trace_paths(self, row: dict[str, Any]) -> list[Path]:
        return [self.directory / p for p in row.get("traces") or []]


def manifest_path(directory: str | Path) -> Path:
    return Path(directory) / MANIFEST_NAME


def read_manifest(directory: str | Path) -> Manifest:
    """Read ``DIR/manifest.jsonl`` (an absent file is an empty manifest); bad lines are input errors."""
    directory = Path(directory)
    path = manifest_path(directory)
    rows: list[dict[str, Any]] = []
    if not path.exists():
        return Manifest(directory, rows)
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(path, f"line {number} is not JSON ({e.msg})") from None
            if not isinstance(row, dict) or "run_id" not in row or row.get("status") not in STATUSES:
                raise InputError(path, f"line {number} is not a manifest row (needs run_id and status)")
            if row.get("manifest_version", 0) > MANIFEST_VERSION:
                raise InputError(path, f"line {number} has manifest_version {row['manifest_version']}; "
                                       f"this tracekit reads up to {MANIFEST_VERSION}")
            rows.append(row)
    return Manifest(directory, rows)


def append_rows(directory: str | Path, rows: Iterable[dict[str, Any]]) -> None:
    """Append rows as whole lines with one write each, flushed to disk before returning."""
    path = manifest_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps({"manifest_version": MANIFEST_VERSION, **row}, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())
