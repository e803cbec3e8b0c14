"""A collection directory's traces as tracekit Parquet: ``DIR/dataset/<trace path>.parquet``.

Each raw trace a manifest row points to is ingested once into the same relative path under
``dataset/`` (``traces/torch/nn_lstm/x.pt.trace.json.gz`` -> ``dataset/torch/nn_lstm/x.parquet``);
analyses then read the Parquet, which loads several times faster than the raw trace. A trace that
fails to ingest is reported and skipped, not fatal: one bad file must not sink a study.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from tracekit.errors import InputError
from tracekit.ingest import load, parquet
from tracekit.manifest import Manifest

RAW_SUFFIXES = (".pt.trace.json.gz", ".json.gz", ".json", ".xplane.pb", ".sqlite")


@dataclass
class Dataset:
    directory: Path
    paths: dict[str, Path] = field(default_factory=dict)  # run_id -> Parquet file
    errors: list[str] = field(default_factory=list)

    def table(self, run_id: str) -> pa.Table:
        return parquet.read(self.paths[run_id])


def _parquet_path(directory: Path, trace: Path) -> Path:
    rel = trace.relative_to(directory)
    name = rel.name
    for suffix in RAW_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    parts = rel.parts[1:-1] if rel.parts and rel.parts[0] == "traces" else rel.parts[:-1]
    return directory / "dataset" / Path(*parts) / f"{name}.parquet"


def ingest(m: Manifest) -> Dataset:
    """Ingest the first ingestible trace of every ok row that has not been ingested yet."""
    out = Dataset(m.directory / "dataset")
    for run_id, row in m.latest().items():
        if row.get("status") != "ok":
            continue
        traces = [p for p in m.trace_paths(row) if p.name.endswith(RAW_SUFFIXES)]
        if not traces:
            continue
        target = _parquet_path(m.directory, traces[0])
        if not target.exists() or target.stat().st_mtime < traces[0].stat().st_mtime:
            try:
                parquet.write(load(traces[0]), target, force=True)
            except InputError as e:
                out.errors.append(f"{run_id}: {e.one_line()}")
                continue
        out.paths[run_id] = target
    return out
