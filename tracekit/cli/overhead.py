"""tracekit overhead DIR...: framework runs against the native baseline, with the excess explained."""

from __future__ import annotations

import argparse

from tracekit.cli._output import add_output_arguments, emit


class OverheadCommand:
    name = "overhead"
    help = "compare framework runs with native baseline runs of the same shape: ratios, pairs, excess decomposition"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("collections", nargs="+", metavar="DIR",
                            help="collection directories (tracekit collect / baseline output, with manifest.jsonl)")
        add_output_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        from tracekit import api

        emit(api.document(api.overhead(args.collections)), args)
        return 0
