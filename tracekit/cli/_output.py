"""Shared by the report commands: -f/-o/--force options and atomic output."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.atomic import write_text_atomic
from tracekit.errors import OutputError

if TYPE_CHECKING:
    from tracekit.ingest import NamedTable
    from tracekit.render.document import Document


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--format", choices=("terminal", "markdown", "json", "html"),
                        help="output format (default: from -o's extension, else terminal)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE (.txt, .md, .json, .html)")
    parser.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    parser.set_defaults(_check_output_first=True)  # tracekit.cli.main refuses -o before the trace is read


def refuse_output(output: Path, force: bool) -> None:
    """Raise when ``output`` cannot be written: it exists (without --force) or its directory does not.
    Checked before the trace is read, so a user learns it at once rather than after the analysis, and
    again when writing."""
    if output.exists() and not force:
        raise OutputError(output, "exists; use --force to overwrite")
    if not output.parent.is_dir():
        raise OutputError(output, f"directory {output.parent} does not exist")


def add_window_arguments(parser: argparse.ArgumentParser) -> None:
    """TRACE and which step or range to analyse (critical-path, whatif)."""
    parser.add_argument("trace", metavar="TRACE", help="a trace file, XSpace run directory or tracekit Parquet file")
    parser.add_argument("--range", dest="range_name", metavar="NAME",
                        help="a record_function / NVTX / TraceMe range or step name (default: the first steady "
                             "step, warm-up and outlier steps skipped; the whole trace when no step is marked)")
    parser.add_argument("--instance", type=int, default=None, metavar="N",
                        help="which occurrence of the range, or which step without --range (from 0)")


@contextlib.contextmanager
def chosen_window_or_input_error(args: argparse.Namespace) -> Iterator[None]:
    """Around an analysis of one window (critical-path, whatif): a window the command chose (no --range
    or --instance: the first steady step, or the whole trace) that holds nothing is the trace's problem,
    reported on the file (exit 1), as is a trace no window of which can be analysed
    (``TraceContentError``); a range the user chose that holds nothing stays a usage error."""
    from tracekit.errors import EmptyWindowError, InputError, TraceContentError

    try:
        yield
    except TraceContentError as e:
        raise InputError(args.trace, str(e)) from None
    except EmptyWindowError as e:
        if args.range_name is None and args.instance is None:
            raise InputError(args.trace, str(e)) from None
        raise


def add_step_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--skip-steps", type=int, default=0, metavar="N",
                        help="treat the first N steps as warm-up (left out of verdicts and headline numbers)")
    parser.add_argument("--keep-all-steps", action="store_true",
                        help="use every step, warm-up and outliers included (they are still listed)")


def load_trace(trace: str) -> NamedTable:
    """Read TRACE while the analysis modules import (``tracekit.ingest.load_beside``): pandas and the
    analyses are most of a short command's start-up, and reading a large file is most of a long one."""
    import importlib

    from tracekit.analyze.frame import ARGS_READ_OF_KINDS, COLUMNS_READ
    from tracekit.ingest import load_beside

    return load_beside(trace, lambda: importlib.import_module("tracekit.api"), args_of_kinds=ARGS_READ_OF_KINDS,
                       columns=COLUMNS_READ)


def emit(document: Document, args: argparse.Namespace) -> None:
    """Render and write to -o atomically (refusing to overwrite without --force), or to stdout."""
    from tracekit.render import pick
    from tracekit.render.terminal_report import TerminalRenderer

    output = Path(args.output) if args.output else None
    renderer = pick(args.format, output)
    if output is None:
        if isinstance(renderer, TerminalRenderer) and sys.stdout.isatty():
            from tracekit.render.terminal_report import data_console

            renderer.print(document, data_console())
        else:
            sys.stdout.write(renderer.render(document))
        return
    refuse_output(output, args.force)
    write_atomic(output, renderer.render(document))
    sys.stderr.write(f"wrote {output}\n")


def write_atomic(output: Path, text: str) -> None:
    """Write ``text`` to a temp file beside ``output``, then rename it into place."""
    write_text_atomic(output, text)
