"""tracekit: profiler-trace analysis for deep-learning workloads.

The Python API mirrors the CLI::

    import tracekit
    table = tracekit.load("trace.json.gz")     # any supported trace, or a tracekit Parquet file
    print(tracekit.info(table))
    r = tracekit.report(table)                 # also launch(), ranges(), compare([...])
    print(tracekit.render(r, "markdown"))
    study = tracekit.run_study("tracekit-run", preset="tiny")   # what `tracekit run` does
"""

from __future__ import annotations

from typing import Any

from tracekit._version import __version__

# The API loads on first use: `tracekit --version` and the CLI's argument parsing stay fast.
_LAZY = {
    "TraceInfo": "tracekit.analyze.summary", "info": "tracekit.analyze.summary",
    "compare": "tracekit.api", "launch": "tracekit.api", "overhead": "tracekit.api", "ranges": "tracekit.api",
    "report": "tracekit.api", "critical_path": "tracekit.api", "whatif": "tracekit.api",
    "InputError": "tracekit.errors", "TracekitError": "tracekit.errors",
    "load": "tracekit.ingest",
    "Study": "tracekit.study", "analyze_study": "tracekit.study", "run_study": "tracekit.study",
}


# ``tracekit.render`` is both a subpackage and the API's render function. Loading the (light)
# subpackage first means the function below keeps the name: importing a submodule later does not
# set the attribute again.
import tracekit.render as _render_package  # noqa: E402,F401


def render(result: Any, fmt: str = "terminal") -> str:
    """Text of a result in one format: terminal, markdown, json or html (``tracekit.api.render``)."""
    from tracekit.api import render as render_result

    return render_result(result, fmt)


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tracekit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = ["InputError", "Study", "TraceInfo", "TracekitError", "__version__", "analyze_study", "compare",
           "critical_path", "info", "launch", "load", "overhead", "ranges", "render", "report", "run_study", "whatif"]
