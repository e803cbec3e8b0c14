"""tracekit ingest FILE... -o OUT: normalize traces into tracekit's Parquet event table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow as pa

from tracekit.errors import UsageError
from tracekit.ingest import load, parquet


class IngestCommand:
    name = "ingest"
    help = "normalize traces (Kineto JSON, XSpace, nsys SQLite) into the tracekit Parquet event table"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("traces", nargs="+", metavar="TRACE", help="trace files or XSpace run directories")
        parser.add_argument("-o", "--output", required=True, metavar="OUT",
                            help="output .parquet file (one trace) or directory (several traces)")
        parser.add_argument("--force", action="store_true", help="overwrite existing outputs")

    def run(self, args: argparse.Namespace) -> int:
        out = Path(args.output)
        several = len(args.traces) > 1
        if several and out.suffix == ".parquet":
            raise UsageError(f"{out}: several traces need an output directory, not a .parquet file")
        # Read everything first, so a bad input leaves no partial output behind.
        tables: list[tuple[Path, pa.Table]] = [(Path(t), load(t)) for t in args.traces]
        for src, table in tables:
            target = out / f"{_stem(src)}.parquet" if several or out.is_dir() else out
            parquet.write(table, target, force=args.force)
            sys.stdout.write(f"{src} -> {target} ({table.num_rows} events)\n")
        return 0


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".json.gz", ".xplane.pb", ".sqlite", ".json", ".gz", ".pb"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name
