"""tracekit report TRACE: where the time went (GPU categories + idle, host, CPU ops) and the verdict."""

from __future__ import annotations

import argparse

from tracekit import api
from tracekit.cli._output import add_output_arguments, emit


class ReportCommand:
    name = "report"
    help = "time breakdown per device and step (GPU categories + idle, host time, CPU op time) and a verdict"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("trace", metavar="TRACE", help="a trace file, XSpace run directory or tracekit Parquet file")
        parser.add_argument("--timesteps", type=int, help="recurrent timesteps per step, to report ops per timestep")
        parser.add_argument("--exclude-last-step", action="store_true",
                            help="drop GPU work launched in the last step (often cut short; HTA's default)")
        parser.add_argument("--count-sync", action="store_true", help="count CUDA sync records as GPU busy time (as HTA does)")
        add_output_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        result = api.report(args.trace, timesteps=args.timesteps, exclude_last_step=args.exclude_last_step,
                            count_sync=args.count_sync)
        emit(api.document(result), args)
        return 0
