"""tracekit compare A B [C ...]: deltas per category, name, range and step; --fail-if for CI."""

from __future__ import annotations

import argparse
import re

from tracekit.cli._output import add_output_arguments, add_step_arguments, emit
from tracekit.errors import UsageError

_STEP_TIME = re.compile(r"^(?P<label>[^=]+)=(?P<num>\d+(\.\d+)?)\s*(?P<unit>ns|us|µs|ms|s)$")
_UNIT_NS = {"ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


def parse_step_times(values: list[str]) -> dict[str, float]:
    """``LABEL=TIME`` (TIME with a unit: 111ms, 0.2s, 950us) -> {label: ns}."""
    out = {}
    for v in values:
        m = _STEP_TIME.match(v.strip())
        if not m:
            raise UsageError(f"--step-time {v!r}: expected LABEL=TIME with a unit, e.g. A=111ms")
        out[m["label"]] = float(m["num"]) * _UNIT_NS[m["unit"]]
    return out


class CompareCommand:
    name = "compare"
    help = "compare traces (any sources) against the first; --fail-if sets exit code 3 for CI"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("traces", nargs="+", metavar="TRACE", help="two or more traces; the first is the baseline")
        parser.add_argument("--label", action="append", metavar="LABEL", help="a label per trace, in order (default A, B, ...)")
        parser.add_argument("--fail-if", action="append", metavar="EXPR",
                            help="e.g. 'total_time > +5%%' or 'kernel_count > +10'; exit 3 when any holds")
        parser.add_argument("--step-time", action="append", metavar="LABEL=TIME", default=[],
                            help="a trace's step time measured without the profiler, e.g. A=111ms; the headline "
                                 "ratio uses these when both traces of a pair have one")
        add_step_arguments(parser)
        add_output_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        from tracekit import api
        from tracekit.analyze.compare import EXIT_COMPARE_FAILED
        from tracekit.analyze.frame import ARGS_READ_OF_KINDS, COLUMNS_READ
        from tracekit.ingest import NamedTable, load

        # Only the args and columns an analysis reads: two big traces are held at once.
        traces: list[api.Trace] = [NamedTable(t, load(t, args_of_kinds=ARGS_READ_OF_KINDS, columns=COLUMNS_READ))
                                   for t in args.traces]
        result = api.compare(traces, labels=args.label, fail_if=args.fail_if, skip_steps=args.skip_steps,
                             keep_all_steps=args.keep_all_steps, step_times=parse_step_times(args.step_time))
        emit(api.document(result), args)
        return EXIT_COMPARE_FAILED if result.result.failed else 0
