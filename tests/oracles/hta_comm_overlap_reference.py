"""Record HTA's communication-computation overlap (traceinsight 0.6.1) on the ../shared/traces/hta
traces that run NCCL kernels (test oracle for ``tracekit.analyze.gpu_communication``).

Run once in a separate virtual environment (HTA pins its own pandas and plotly) and commit the JSON:

    python -m venv /tmp/hta && /tmp/hta/bin/pip install traceinsight==0.6.1
    /tmp/hta/bin/python tests/oracles/hta_comm_overlap_reference.py > tests/oracles/hta_comm_overlap_0.6.1.json

For each trace: ``get_comm_comp_overlap()``'s ``comp_comm_overlap_pctg`` (the percent of NCCL
kernel time, merged, with a compute kernel running) or the error HTA raised, read with
``include_last_profiler_step=True`` (HTA keeps the kernels launched up to the last step's end; by
default it drops the last step's, a filter tracekit's whole-trace figure does not apply) and with
the default (``default_pctg``).
HTA_DISABLE_NS_ROUNDING=1, as in ``hta_reference.py``: tracekit keeps the exact ns values.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

from hta.trace_analysis import TraceAnalysis

SHARED = Path(__file__).resolve().parents[3] / "shared" / "traces" / "hta"
TRACES = [
    "df_index_resolver/df_index_resolver.json.gz",
    "nccl_parser_config/nccl_data.json.gz",
    "negative_queue_length_values_check/rank0.json.gz",
    "trace_diff/control/control.json.gz",
    "trace_diff/test/test.json.gz",
    "trace_filter/sampled_rank-0.json.gz",
    "trace_filter/sampled_rank-1.json.gz",
]


def measure(rel: str) -> dict:
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(SHARED / rel, Path(d) / Path(rel).name)  # HTA reads every trace in a directory
        out = {}
        for key, last in (("comp_comm_overlap_pctg", True), ("default_pctg", False)):
            try:
                with contextlib.redirect_stdout(sys.stderr):
                    ta = TraceAnalysis(trace_dir=d, include_last_profiler_step=last)
                    overlap = ta.get_comm_comp_overlap(visualize=False)
                out[key] = float(overlap["comp_comm_overlap_pctg"].iloc[0])
            except Exception as exc:  # noqa: BLE001 - the oracle records what HTA does, errors included
                out[key] = f"{type(exc).__name__}: {exc}"[:200]
    return out


def main() -> int:
    logging.disable(logging.WARNING)
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    out = {"hta_version": version("traceinsight"), "env": {"HTA_DISABLE_NS_ROUNDING": "1"},
           "traces": {rel: measure(rel) for rel in TRACES}}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
