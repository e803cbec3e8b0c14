"""tracekit whatif TRACE: the step replayed under each optimization scenario, ranked by predicted saving."""

from __future__ import annotations

import argparse

from tracekit.cli._output import (
    add_output_arguments,
    add_window_arguments,
    chosen_window_or_input_error,
    emit,
    load_trace,
)


class WhatIfCommand:
    name = "whatif"
    help = ("predict the step time if dispatch, launches, elementwise ops, cell loops, precision, syncs or copies "
            "changed")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_window_arguments(parser)
        add_output_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        trace = load_trace(args.trace)  # imports tracekit.api while it reads
        from tracekit import api

        with chosen_window_or_input_error(args):
            result = api.whatif(trace, args.range_name, args.instance)
        emit(api.document(result), args)
        return 0
