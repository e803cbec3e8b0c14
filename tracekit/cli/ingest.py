"""tracekit ingest TRACE... -o OUT: one trace to a Parquet file, or many into a partitioned dataset."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tracekit.errors import OutputError, UsageError


class IngestCommand:
    name = "ingest"
    help = "normalize traces (Kineto JSON, XSpace, ONNX Runtime and Paddle profiles, nsys SQLite) into a tracekit Parquet file or dataset"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("traces", nargs="+", metavar="TRACE", help="trace files, XSpace run directories, or "
                                                                        "directories to search for traces")
        parser.add_argument("-o", "--output", required=True, metavar="OUT",
                            help="a .parquet file (one trace), or a dataset directory: one partition per trace, "
                                 "files already in it (same content) are skipped")
        parser.add_argument("--force", action="store_true", help="overwrite an existing .parquet output")
        parser.add_argument("--run", help="the dataset's run label for these traces (default: each input's name)")
        parser.add_argument("--engine", choices=("local", "dask"), default="local",
                            help="where to ingest a dataset's files: this process or a Dask cluster")
        parser.add_argument("--scheduler", metavar="ADDRESS", help="Dask scheduler address (default: a LocalCluster)")
        parser.add_argument("--window-mb", type=int, metavar="MB",
                            help="a Kineto trace to a .parquet file: read MB of its events at a time, so memory "
                                 "is bounded by the window, not the file (default: only when the whole file "
                                 "would not fit in half the memory available; 0: never)")

    def run(self, args: argparse.Namespace) -> int:
        from tracekit.ingest import load, parquet

        out = Path(args.output)
        if out.suffix == ".parquet":
            if len(args.traces) > 1:
                raise UsageError(f"{out}: several traces need a dataset directory, not a .parquet file")
            if out.exists() and not args.force:  # before the read, which can take minutes
                raise OutputError(out, "already exists (use --force to overwrite)")
            rows = _windowed(Path(args.traces[0]), out, args.window_mb, args.force)
            if rows is not None:
                _say_steps_not_inferred(out)
            if rows is None:
                table = load(args.traces[0])  # read first: a bad input leaves no output behind
                parquet.write(table, out, force=args.force)
                rows = table.num_rows
            sys.stdout.write(f"{args.traces[0]} -> {out} ({rows} events)\n")
            return 0
        from tracekit.dataset import ingest

        result = ingest(args.traces, out, run=args.run, engine=args.engine, scheduler=args.scheduler)
        for entry in result.added:
            sys.stdout.write(f"{entry.source_file} -> {out / entry.partition} ({entry.rows} events)\n")
        for error in result.errors:
            sys.stderr.write(f"tracekit: error: {error}\n")
        sys.stdout.write(f"{len(result.added)} added, {len(result.skipped)} already in {out}, "
                         f"{len(result.errors)} failed\n")
        return 1 if result.errors else 0


def _say_steps_not_inferred(out: Path) -> None:
    """The windowed ingest's note when it left a trace without steps for want of memory."""
    import json

    from tracekit import schema
    from tracekit.ingest import parquet

    meta = parquet.open_checked(out).schema_arrow.metadata or {}
    note = json.loads(meta.get(schema.META_TRACE_META_JSON.encode(), b"{}")).get("steps_not_inferred")
    if note:
        sys.stderr.write(f"tracekit: note: {out}: steps not inferred: {note}; `tracekit report` of the trace file "
                         "itself infers them\n")


def _windowed(trace: Path, out: Path, window_mb: int | None, force: bool) -> int | None:
    """Ingest a Kineto trace window by window when asked to or when it would not fit; the number of
    events written, or None when the whole-file reader should read it."""
    if window_mb is not None and window_mb < 0:
        raise UsageError(f"--window-mb must be 0 or more, not {window_mb}")
    if window_mb == 0:
        return None
    from tracekit.ingest import detect, kineto_windows, resolve_directory

    trace = resolve_directory(trace)
    fmt = detect(trace)
    if fmt not in kineto_windows.KINETO_FORMATS:
        if window_mb is not None:
            raise UsageError(f"{trace}: --window-mb reads Kineto JSON traces only, this is {fmt}")
        return None
    gz = kineto_windows.KINETO_FORMATS[fmt]
    if window_mb is None and not kineto_windows.needs_windows(trace, gz):
        return None
    window = (window_mb or kineto_windows.DEFAULT_WINDOW_BYTES >> 20) << 20
    return kineto_windows.write_parquet(trace, out, window_bytes=window, gz=gz, force=force)
