"""A partitioned Parquet dataset of many traces, ingested incrementally, read one trace at a time.

Layout (hive partitioning, so DuckDB and pyarrow.dataset see source, run, rank and trace as
columns without them being stored in the files)::

    DATASET/_tracekit_dataset.jsonl        one line per ingested trace (the index)
    DATASET/_tracekit_dataset.lock         the ingest lock (stays: removing a flock file would race)
    DATASET/source=torch/run=train/rank=3/trace=1a2b3c4d5e6f7a8b/part-0.parquet

Each partition is one trace's event table exactly as ``tracekit ingest`` writes it (schema,
metadata and all), written atomically; its index line is appended only after, by the one
process that coordinates (workers never touch the index). A file whose content hash is already
in the index is skipped, so ingesting a growing directory again only reads the new files.

Concurrency and kills: an ingest holds an exclusive lock on ``DATASET/_tracekit_dataset.lock`` (``flock``,
released by the OS if the process dies) from reading the index to appending to it, so two
ingests into one dataset run one after the other and never add a trace twice. A process killed
mid-append leaves at most a torn last line (no newline): readers ignore it and the next ingest
cuts it off before appending. A process killed before its append leaves partitions that are not
in the index; the next ingest writes them again. Either way a re-run completes the dataset with
nothing lost and nothing duplicated.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracekit import schema
from tracekit.errors import InputError, UsageError

INDEX_NAME = "_tracekit_dataset.jsonl"
LOCK_NAME = "_tracekit_dataset.lock"
RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
TRACE_SUFFIXES = (".json", ".json.gz", ".xplane.pb", ".sqlite", ".nsys-rep", ".qdrep", ".parquet")


@dataclass(frozen=True)
class Entry:
    """One ingested trace: where its partition is and what it came from."""

    trace_id: str
    sha256: str
    source: str
    run: str
    rank: int
    source_file: str
    partition: str  # relative to the dataset directory
    rows: int

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def is_dataset(path: str | Path) -> bool:
    return (Path(path) / INDEX_NAME).is_file()


def read_index(directory: str | Path) -> list[Entry]:
    """The dataset's entries in index order; a torn last line (a killed append) is ignored, and a trace
    listed twice counts once."""
    path = Path(directory) / INDEX_NAME
    if not path.exists():
        return []
    entries: dict[str, Entry] = {}
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    complete = lines[:-1]  # the part after the last newline is empty, or a torn append
    for number, line in enumerate(complete, 1):
        if line.strip():
            try:
                entry = Entry(**{k: v for k, v in json.loads(line).items() if k != "ingested_at"})
            except (ValueError, TypeError) as e:
                raise InputError(path, f"line {number} is not a dataset index entry ({e})") from None
            entries.setdefault(entry.sha256, entry)
    return list(entries.values())


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Hold the dataset's exclusive lock (blocking until another ingest is done)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / LOCK_NAME, "a+b") as handle:
        try:
            import fcntl
        except ImportError:  # no flock (Windows): one ingest at a time is then the user's to ensure
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def sha256_of(path: Path) -> str:
    """Content hash of a file, or of every file under a directory (an XSpace run directory)."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        with open(f, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def find_traces(inputs: Sequence[str | Path]) -> list[Path]:
    """The trace files named or under the named directories (XSpace run directories count as one)."""
    found: list[Path] = []
    for item in inputs:
        p = Path(item)
        if not p.exists():
            raise InputError(p, "no such file or directory")
        if p.is_file() or any(p.glob("*.xplane.pb")):
            found.append(p)
            continue
        for f in sorted(p.rglob("*")):
            if f.is_file() and f.name.endswith(TRACE_SUFFIXES) and not f.name.startswith(".") \
                    and INDEX_NAME not in f.name:
                found.append(f)
    return found


def _rank(metadata: dict[bytes, bytes] | None, source_file: Path) -> int:
    meta = json.loads((metadata or {}).get(schema.META_TRACE_META_JSON.encode(), b"{}") or b"{}")
    info = meta.get("distributedInfo")
    if isinstance(info, dict) and str(info.get("rank", "")).lstrip("-").isdigit():
        return int(info["rank"])
    m = RANK_IN_NAME.search(source_file.name)
    return int(m.group(1)) if m else -1


def _safe(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", value)[:80] or "_"


def ingest_one(path: str, directory: str, run: str, sha256: str) -> dict[str, Any]:
    """Ingest one trace into its partition (worker-side: no index writes). Returns the entry, or
    ``{"error": one-line message}`` for a bad file, so one bad file does not fail a whole batch."""
    from tracekit.ingest import load, parquet

    src = Path(path)
    try:
        windowed = _ingest_windowed(src, Path(directory), sha256)
        if windowed is None:
            table = load(src, file_sha256=sha256 if src.is_file() else None)  # a directory's hash is of its files
            metadata, rows = table.schema.metadata, table.num_rows
        else:
            written, metadata, rows = windowed
    except InputError as e:
        return {"error": e.one_line(), "source_file": path}
    meta = metadata or {}
    source = meta.get(schema.META_SOURCE.encode(), b"unknown").decode()
    trace_id = meta.get(schema.META_TRACE_ID.encode(), b"").decode() or sha256[:16]
    rank = _rank(metadata, src)
    partition = f"source={_safe(source)}/run={_safe(run)}/rank={rank}/trace={trace_id}/part-0.parquet"
    target = Path(directory) / partition
    if windowed is None:
        parquet.write(table, target, force=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(written, target)
    return Entry(trace_id, sha256, source, run, rank, str(src), partition, rows).as_dict()


def _ingest_windowed(src: Path, directory: Path, sha256: str) -> tuple[Path, dict[bytes, bytes] | None, int] | None:
    """A Kineto trace too big to read whole, written window by window to a temporary file in the
    dataset (its partition comes from the metadata, known only once it is read): the file, its
    metadata and its row count; None for any other trace."""
    from tracekit.ingest import detect, kineto_windows

    try:
        fmt = detect(src)
    except InputError:
        return None  # load() reports it
    if fmt not in kineto_windows.KINETO_FORMATS or not kineto_windows.needs_windows(src, kineto_windows.KINETO_FORMATS[fmt]):
        return None
    gz = kineto_windows.KINETO_FORMATS[fmt]
    import pyarrow.parquet as pq

    # Named per task: the same bytes given twice in one call are read by two tasks at once.
    written = directory / f".ingest-{sha256[:16]}-{os.getpid()}-{threading.get_ident()}.parquet"
    try:
        rows = kineto_windows.write_parquet(src, written, gz=gz, force=True)
        metadata = pq.read_schema(written).metadata
    except BaseException:
        written.unlink(missing_ok=True)
        raise
    return written, metadata, rows


@dataclass
class IngestResult:
    added: list[Entry]
    skipped: list[str]  # already in the dataset (same content)
    errors: list[str]
    by_file: dict[str, Entry]  # every input trace that is in the dataset now, added or found there


def ingest(inputs: Sequence[str | Path], directory: str | Path, run: str | None = None, engine: str = "local",
           scheduler: str | None = None) -> IngestResult:
    """Ingest traces into the dataset at ``directory``; files whose content is already there are skipped.

    Args:
        inputs: trace files and/or directories to search for traces.
        run: the ``run`` partition value (default: each input's own name).
        engine: ``local`` (this process) or ``dask`` (see ``tracekit.engine``).
    """
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: exists and is not a directory")
    if out.exists() and not _dataset_shaped(out):
        raise UsageError(f"{out}: not empty and not a tracekit dataset (no {INDEX_NAME})")
    with _locked(out):
        return _ingest_locked(inputs, out, run, engine, scheduler)


def _dataset_shaped(directory: Path) -> bool:
    """Empty, or holding only what ingests write: the index, the lock and partition folders (an ingest
    that is running, or was killed before its first index line, has partitions but no index yet)."""
    return all(p.name in (INDEX_NAME, LOCK_NAME) or (p.is_dir() and p.name.startswith("source="))
               for p in directory.iterdir())


def _ingest_locked(inputs: Sequence[str | Path], out: Path, run: str | None, engine: str,
                   scheduler: str | None) -> IngestResult:
    from tracekit.engine import session

    known = {e.sha256: e for e in read_index(out)}
    found = [(trace, run or Path(item).name.split(".")[0]) for item in inputs for trace in find_traces([item])]
    with session(engine, scheduler) as mapper:
        # One task per file hashes it and ingests it unless the dataset holds it: no barrier between
        # hashing all files and ingesting them, which left workers idle (the index does not change
        # while the lock is held, so each worker reads it once).
        results = mapper.map(hash_and_ingest, [(str(t), str(out), label) for t, label in found])
    added: list[Entry] = []
    skipped: list[str] = []
    errors: list[str] = []
    repeated: list[tuple[str, str]] = []
    first_of: dict[str, str] = {}  # digest -> the first input with it in this call
    for (trace, _), result in zip(found, results, strict=True):
        digest, path = result["sha256"], str(trace)
        if digest in known:
            skipped.append(path)
        elif digest in first_of:
            # The same bytes twice in one call: the first counts. The other task read them too and
            # wrote the same partition, unless its run label differs; that copy goes.
            repeated.append((path, first_of[digest]))
            if "partition" in result and all(e.partition != result["partition"] for e in added):
                _remove_partition(out, result["partition"])
        else:
            first_of[digest] = path
            if "error" in result:
                errors.append(result["error"])
            else:
                added.append(Entry(**result))
    _append_index(out, added)
    (out / INDEX_NAME).touch()
    by_file = {path: known[result["sha256"]] for path, result in zip(map(str, (t for t, _ in found)), results, strict=True)
               if result["sha256"] in known}
    by_file.update({e.source_file: e for e in added})
    by_file.update({path: by_file[first] for path, first in repeated if first in by_file})
    return IngestResult(added, skipped + [p for p, _ in repeated], errors, by_file)


def _remove_partition(directory: Path, partition: str) -> None:
    """Delete a partition file and the folders it leaves empty (source=/run=/rank=/trace=)."""
    path = directory / partition
    path.unlink(missing_ok=True)
    for folder in path.parents:
        if folder == directory or not folder.is_relative_to(directory) or any(folder.iterdir()):
            break
        folder.rmdir()


def hash_and_ingest(path: str, directory: str, run: str) -> dict[str, Any]:
    """Worker side: the file's content hash, and unless the dataset already holds that content, its
    ingest (``ingest_one``'s entry, or its error). Always has ``sha256``."""
    digest = sha256_of(Path(path))
    if digest in _known_digests(Path(directory)):
        return {"sha256": digest, "status": "known"}
    return {"sha256": digest, **ingest_one(path, directory, run, digest)}


_KNOWN: dict[tuple[str, int, int], frozenset[str]] = {}


def _known_digests(directory: Path) -> frozenset[str]:
    """The content hashes in the dataset's index, read once per index state in each process."""
    index = directory / INDEX_NAME
    try:
        st = index.stat()
    except FileNotFoundError:
        return frozenset()
    key = (str(index.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _KNOWN:
        _KNOWN.clear()
        _KNOWN[key] = frozenset(e.sha256 for e in read_index(directory))
    return _KNOWN[key]


def _append_index(directory: Path, entries: Iterable[Entry]) -> None:
    """Append entries (under the lock), first cutting off a torn last line left by a killed append."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    path = directory / INDEX_NAME
    if path.exists():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(path, "r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)
    with open(path, "a", encoding="utf-8") as f:
        for e in entries:
            f.write(json.dumps({**e.as_dict(), "ingested_at": now}, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def partitions(directory: str | Path) -> list[tuple[Entry, Path]]:
    """Every trace of the dataset with its partition file, in index order."""
    d = Path(directory)
    if not is_dataset(d):
        raise InputError(d, f"not a tracekit dataset (no {INDEX_NAME}); create one with tracekit ingest ... -o {d}/")
    return [(e, d / e.partition) for e in read_index(d)]


def _metrics_task(partition: str) -> dict[str, float]:
    """Worker-side: read one partition and reduce it (the table never leaves the worker)."""
    from tracekit.analyze.frame import COLUMNS_READ
    from tracekit.analyze.per_trace import trace_metrics
    from tracekit.ingest import parquet

    return trace_metrics(parquet.read(Path(partition), COLUMNS_READ))


def per_trace_metrics(directory: str | Path, engine: str = "local", scheduler: str | None = None) -> Any:
    """One row per trace of the dataset: identity columns and ``compare``'s metrics (a DataFrame)."""
    import pandas as pd

    from tracekit.engine import map_tasks

    parts = partitions(directory)
    results = map_tasks(_metrics_task, [(str(p),) for _, p in parts], engine=engine, scheduler=scheduler)
    records = [{"trace_id": e.trace_id, "source": e.source, "run": e.run, "rank": e.rank,
                "source_file": e.source_file, "rows": e.rows, **m} for (e, _), m in zip(parts, results, strict=True)]
    return pd.DataFrame.from_records(records).fillna(0) if records else pd.DataFrame(
        columns=["trace_id", "source", "run", "rank", "source_file", "rows", "step_time"])
