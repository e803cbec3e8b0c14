"""tracekit report TRACE: where the time went (GPU categories + idle, host, CPU ops) and the verdict."""

from __future__ import annotations

import argparse

from tracekit.cli._output import add_output_arguments, add_step_arguments, emit, load_trace


class ReportCommand:
    name = "report"
    help = "time breakdown per device and step (GPU categories + idle, host time, CPU op time) and a verdict"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("trace", metavar="TRACE", help="a trace file, XSpace run directory, tracekit Parquet file, "
                                                            "or dataset directory (one line per trace, grouped by --by)")
        parser.add_argument("--timesteps", type=int, help="recurrent timesteps per step, to report ops per timestep")
        parser.add_argument("--exclude-last-step", action="store_true",
                            help="drop GPU work launched in the last step (often cut short; HTA's default)")
        parser.add_argument("--count-sync", action="store_true", help="count CUDA sync records as GPU busy time (as HTA does)")
        parser.add_argument("--by", choices=("trace", "rank", "run", "source"), default="rank",
                            help="for a dataset: group traces by rank (default), run or source, or list traces only")
        parser.add_argument("--engine", choices=("local", "dask"), default="local",
                            help="for a dataset: analyze traces in this process or on a Dask cluster")
        parser.add_argument("--scheduler", metavar="ADDRESS", help="Dask scheduler address (default: a LocalCluster)")
        add_step_arguments(parser)
        add_output_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        from tracekit.dataset import is_dataset

        if is_dataset(args.trace):
            from tracekit.dataset import per_trace_metrics
            from tracekit.render.dataset_document import dataset_document

            traces = per_trace_metrics(args.trace, engine=args.engine, scheduler=args.scheduler)
            emit(dataset_document(args.trace, traces, args.by), args)
            return 0
        trace = load_trace(args.trace)  # imports tracekit.api while it reads
        from tracekit import api

        result = api.report(trace, timesteps=args.timesteps, exclude_last_step=args.exclude_last_step,
                            count_sync=args.count_sync,
                            skip_steps=args.skip_steps, keep_all_steps=args.keep_all_steps)
        emit(api.document(result), args)
        return 0
