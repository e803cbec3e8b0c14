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

from tracekit._version import __version__
from tracekit.analyze.summary import TraceInfo, info  # noqa: E402
from tracekit.api import compare, launch, overhead, ranges, render, report  # noqa: E402
from tracekit.errors import InputError, TracekitError  # noqa: E402
from tracekit.ingest import load  # noqa: E402
from tracekit.study import Study, analyze_study, run_study  # noqa: E402

__all__ = ["InputError", "Study", "TraceInfo", "TracekitError", "__version__", "analyze_study", "compare", "info",
           "launch", "load", "overhead", "ranges", "render", "report", "run_study"]
