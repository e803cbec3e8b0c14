"""tracekit compare A B [C ...]: deltas per category, name, range and step; --fail-if for CI."""

from __future__ import annotations

import argparse

from tracekit import api
from tracekit.analyze.compare import EXIT_COMPARE_FAILED
from tracekit.cli._output import add_output_arguments, add_step_arguments, emit


class CompareCommand:
    name = "compare"
    help = "compare traces (any sources) against the first; --fail-if sets exit code 3 for CI"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("traces", nargs="+", metavar="TRACE", help="two or more traces; the first is the baseline")
        parser.add_argument("--label", action="append", metavar="LABEL", help="a label per trace, in order (default A, B, ...)")
        parser.add_argument("--fail-if", action="append", metavar="EXPR",
                            help="e.g. 'total_time > +5%%' or 'kernel_count > +10'; exit 3 when any holds")
        add_step_arguments(parser)
        add_output_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        result = api.compare(args.traces, labels=args.label, fail_if=args.fail_if, skip_steps=args.skip_steps,
                             keep_all_steps=args.keep_all_steps)
        emit(api.document(result), args)
        return EXIT_COMPARE_FAILED if result.result.failed else 0
