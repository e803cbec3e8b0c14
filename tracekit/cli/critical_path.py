"""tracekit critical-path TRACE: the longest chain of dependent work in a step or range, and what bounds it."""

from __future__ import annotations

import argparse

from tracekit.cli._output import (
    add_output_arguments,
    add_window_arguments,
    chosen_window_or_input_error,
    emit,
    load_trace,
)


class CriticalPathCommand:
    name = "critical-path"
    help = "the critical path of a step or range: CPU-bound, launch and kernel-kernel overhead, GPU compute"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_window_arguments(parser)
        add_output_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        trace = load_trace(args.trace)  # imports tracekit.api while it reads
        from tracekit import api

        with chosen_window_or_input_error(args):
            result = api.critical_path(trace, args.range_name, args.instance)
        emit(api.document(result), args)
        return 0
