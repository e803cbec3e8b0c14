"""tracekit info TRACE: what a trace holds (source, span, events by kind, devices, steps, links)."""

from __future__ import annotations

import argparse
import sys


class InfoCommand:
    name = "info"
    help = "print what a trace holds: source, span, event counts by kind, devices, steps, link rates"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("trace", metavar="TRACE", help="a trace file, XSpace run directory or tracekit Parquet file")
        parser.add_argument("-f", "--format", choices=("terminal", "json"), default="terminal", help="output format")

    def run(self, args: argparse.Namespace) -> int:
        from tracekit.analyze.summary import info
        from tracekit.ingest import load
        from tracekit.render import info_report

        summary = info(load(args.trace))
        if args.format == "json":
            sys.stdout.write(info_report.to_json(summary) + "\n")
        else:
            info_report.print_terminal(summary)
        return 0
