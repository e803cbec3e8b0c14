"""tracekit export TRACE -o OUT.json[.gz]: any trace as Kineto-dialect Chrome trace JSON (Perfetto, HTA)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tracekit.errors import OutputError


class ExportCommand:
    name = "export"
    help = "write a trace (Kineto, XSpace, ONNX Runtime, Paddle, nsys SQLite, tracekit Parquet) as Chrome trace JSON in Kineto's dialect"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("trace", metavar="TRACE", help="a trace file, XSpace run directory or tracekit Parquet file")
        parser.add_argument("-o", "--output", required=True, metavar="OUT",
                            help="OUT.json, or OUT.json.gz for gzip (what Perfetto and HTA open)")
        parser.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
        parser.add_argument("--annotate", action="store_true",
                            help="add tracekit's findings: each event's class, GPU idle gaps with what the host "
                                 "did, the verdict, and counter tracks (GPU utilization, launch queue, dispatch)")

    def run(self, args: argparse.Namespace) -> int:
        from tracekit.export import kineto_json
        from tracekit.ingest import load

        out = Path(args.output)
        if not out.name.endswith((".json", ".json.gz")):
            raise OutputError(out, "the output must end in .json or .json.gz")
        if out.exists() and not args.force:
            raise OutputError(out, "already exists (use --force to overwrite)")
        out.parent.mkdir(parents=True, exist_ok=True)
        source = Path(args.trace)
        if source.suffix == ".parquet" and source.is_file() and not args.annotate:
            written = kineto_json.export_parquet(source, out)  # streams: never the whole table in memory
        else:
            table = load(source)  # read first: a bad input leaves no output behind
            overlays = None
            if args.annotate:
                from tracekit.export.annotate import overlay_events

                overlays, table = overlay_events(table)
            written = kineto_json.export_table(table, out, overlays)
        sys.stdout.write(f"{args.trace} -> {out} ({written:,} events)\n")
        return 0
