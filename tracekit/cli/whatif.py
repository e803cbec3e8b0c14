"""tracekit whatif TRACE: the step replayed under each optimization scenario, ranked by predicted saving."""

from __future__ import annotations

import argparse

from tracekit.cli._output import add_output_arguments, emit


class WhatIfCommand:
    name = "whatif"
    help = "predict the step time if dispatch, launches, elementwise ops, cell loops, precision or syncs changed"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("trace", metavar="TRACE", help="a trace file, XSpace run directory or tracekit Parquet file")
        parser.add_argument("--range", dest="range_name", metavar="NAME",
                            help="a range or step name (default: the first step; the whole trace when none is marked)")
        parser.add_argument("--instance", type=int, default=0, metavar="N", help="which occurrence of the range (from 0)")
        add_output_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        from tracekit import api

        emit(api.document(api.whatif(args.trace, args.range_name, args.instance)), args)
        return 0
