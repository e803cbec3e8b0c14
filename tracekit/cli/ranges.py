"""tracekit ranges TRACE: time per NVTX / record_function / TraceMe range, with GPU projection."""

from __future__ import annotations

import argparse

from tracekit.cli._output import add_output_arguments, emit, load_trace


class RangesCommand:
    name = "ranges"
    help = "time per NVTX / record_function / TraceMe range, nested, with CPU span and GPU projection"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("trace", metavar="TRACE", help="a trace file, XSpace run directory or tracekit Parquet file")
        add_output_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        trace = load_trace(args.trace)  # imports tracekit.api while it reads
        from tracekit import api

        emit(api.document(api.ranges(trace)), args)
        return 0
