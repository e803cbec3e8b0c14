"""One error hierarchy, caught once in ``tracekit.cli.main`` and turned into an exit code."""

from __future__ import annotations

from pathlib import Path


class TracekitError(Exception):
    """Base class: a problem tracekit reports as one line, with an exit code, and no traceback."""

    exit_code = 1

    def one_line(self) -> str:
        """The message on one line, with any control character in a file name or value made visible."""
        from tracekit.text import visible

        return visible(str(self))


class InputError(TracekitError):
    """A file or directory that cannot be read as a trace: names the path and the problem."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class OutputError(TracekitError):
    """An output that cannot be written (exists without --force, unwritable directory, ...)."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class UsageError(TracekitError):
    """Bad command-line usage; exits 2 like argparse."""

    exit_code = 2


class TraceContentError(TracekitError):
    """A trace that reads fine but holds nothing an analysis can work with (a GPU program's host
    profiled alone, overlapping events on one thread): the trace's problem, not the command line's.
    The commands report it on the file (``InputError``, exit 1)."""


class EmptyWindowError(UsageError):
    """The step or range an analysis was given holds nothing to analyse. A usage error where the user
    chose it; where the command chose it (the first step, the whole trace), the trace's own problem,
    which the command line reports as an ``InputError`` on the file
    (``tracekit.analyze.critical_path.empty_window`` says where to look next)."""
