"""Command line: a registry of thin subcommands and ``main(argv) -> int``, the one place that
turns errors into exit codes (1: bad input or output, 2: usage, 3: a compare --fail-if held)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from tracekit import __version__
from tracekit.errors import TracekitError
from tracekit.pages import prefer_base_pages


class Command(Protocol):
    """A subcommand: its name, one-line help, how it adds its arguments, and what it runs."""

    name: str
    help: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _commands() -> list[Command]:
    from tracekit.cli import (
        baseline,
        collect,
        compare,
        critical_path,
        export,
        info,
        ingest,
        launch,
        overhead,
        ranges,
        report,
        run,
        sql,
        whatif,
    )

    return [ingest.IngestCommand(), info.InfoCommand(), report.ReportCommand(), launch.LaunchCommand(),
            ranges.RangesCommand(), compare.CompareCommand(), collect.CollectCommand(),
            baseline.BaselineCommand(), overhead.OverheadCommand(), run.RunCommand(),
            sql.SqlCommand(), export.ExportCommand(), critical_path.CriticalPathCommand(), whatif.WhatIfCommand()]


# The commands that run the LSTM workloads in this process (and the analyses after them).
RUNS_WORKLOADS = ("collect", "baseline", "run")
# Whether the command that ran holds no state that needs the interpreter's teardown (console_main).
_ANALYSIS_ONLY: list[bool] = [False]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"tracekit: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tracekit", description="Profiler-trace analysis: torch.profiler, TensorFlow and Nsight Systems in one schema.")
    parser.add_argument("--version", action="version", version=f"tracekit {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for cmd in _commands():
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(p)
        p.set_defaults(_command=cmd)
    return parser


def import_numpy_with_one_blas_thread() -> None:
    """Import numpy with OpenBLAS on one thread, unless numpy is already loaded or the user chose.

    tracekit does no linear algebra, but OpenBLAS starts a thread per core when numpy is imported,
    and those threads spin for ~0.1 s of CPU: on a 2-core machine, the core the Kineto scanner's
    second thread needs. The variable is removed again after the import, so that a workload or
    the native baseline started from here keeps its own default.
    """
    if "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run tracekit with ``argv``; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    import_numpy_with_one_blas_thread()
    _ANALYSIS_ONLY[0] = args._command.name not in RUNS_WORKLOADS
    if _ANALYSIS_ONLY[0]:  # a profiled workload runs as the user's own would
        prefer_base_pages()
    try:
        if getattr(args, "_check_output_first", False) and args.output:
            from tracekit.cli._output import refuse_output

            refuse_output(Path(args.output), args.force)
        return int(args._command.run(args))
    except TracekitError as e:
        if args.debug:
            raise
        sys.stderr.write(f"tracekit: error: {e.one_line()}\n")
        return e.exit_code
    except MemoryError:
        if args.debug:
            raise
        sys.stderr.write("tracekit: error: out of memory: the input is larger than this machine can analyze at once "
                         "(split it, or ingest it on a machine with more memory)\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("tracekit: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0


def console_main() -> None:
    """Entry point of the ``tracekit`` console script."""
    code = main()
    if not _ANALYSIS_ONLY[0]:
        sys.exit(code)
    # An analysis command has written and closed its outputs (atomically) and closed any Dask cluster
    # by now: exit without the interpreter's teardown, which frees a big trace's arrays and objects one
    # by one (0.2-0.3 s after a report of 5M events, the trace's pages handed back to the kernel).
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (| head): nothing more can reach it
            pass
    os._exit(code)
