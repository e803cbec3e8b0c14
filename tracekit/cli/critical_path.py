"""tracekit critical-path TRACE: the longest chain of dependent work in a step or range, and what bounds it."""

from __future__ import annotations

import argparse

from tracekit.cli._output import add_output_arguments, emit


class CriticalPathCommand:
    name = "critical-path"
    help = "the critical path of a step or range: CPU-bound, launch and kernel-kernel overhead, GPU compute"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("trace", metavar="TRACE", help="a trace file, XSpace run directory or tracekit Parquet file")
        parser.add_argument("--range", dest="range_name", metavar="NAME",
                            help="a record_function / NVTX / TraceMe range or step name (default: the first step; the "
                                 "whole trace when no step is marked)")
        parser.add_argument("--instance", type=int, default=0, metavar="N", help="which occurrence of the range (from 0)")
        add_output_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        from tracekit import api

        emit(api.document(api.critical_path(args.trace, args.range_name, args.instance)), args)
        return 0
