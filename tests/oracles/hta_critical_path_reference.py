"""Record HTA's critical-path breakdown (traceinsight 0.6.1) on ../shared/traces/hta/critical_path.

Run once in a separate virtual environment (HTA pins its own pandas and networkx) and commit the JSON:

    python -m venv /tmp/hta && /tmp/hta/bin/pip install traceinsight==0.6.1
    /tmp/hta/bin/python tests/oracles/hta_critical_path_reference.py > tests/oracles/hta_critical_path_0.6.1.json

For each (trace, annotation, instance): ``CPGraph.summary()``, the percent of the critical path per
bound type, or the error HTA raised.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

from hta.trace_analysis import TraceAnalysis

SHARED = Path(__file__).resolve().parents[3] / "shared" / "traces" / "hta" / "critical_path"
ALEXNET_FORWARD = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
CASES = [
    ("alexnet/benchmark_result_2869224_1695835535_trace.json.gz", ALEXNET_FORWARD, 0),
    ("alexnet/benchmark_result_2869224_1695835535_trace.json.gz", ALEXNET_FORWARD, 1),
    ("simple_add/benchmark_result_493459_1694039959_trace.json.gz", ALEXNET_FORWARD, 0),
    ("cuda_event_sync/event_sync_trace.json.gz", "ProfilerStep", 0),
    ("cuda_event_sync_multi_stream/event_sync_trace.json.gz", "", 0),
    # Ranks of multi-GPU jobs with NCCL kernels on a stream of their own (HTA reads the trace's rank).
    ("../trace_diff/control/control.json.gz", "ProfilerStep", 0, 3),
    ("../trace_diff/test/test.json.gz", "ProfilerStep", 0, 1),
    ("../trace_filter/sampled_rank-0.json.gz", "ProfilerStep", 0, 0),
    ("../df_index_resolver/df_index_resolver.json.gz", "ProfilerStep", 0, 1),
]


def measure(rel: str, annotation: str, instance: int, rank: int = 0) -> dict:
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(SHARED / rel, Path(d) / Path(rel).name)
        try:
            with contextlib.redirect_stdout(sys.stderr):
                ta = TraceAnalysis(trace_dir=d)
                cp, ok = ta.critical_path_analysis(rank=rank, annotation=annotation, instance_id=instance)
            if not ok:
                return {"error": "critical_path_analysis returned failure"}
            with contextlib.redirect_stdout(sys.stderr):  # summary() prints a heading
                summary = cp.summary()
        except Exception as e:  # noqa: BLE001 (an HTA failure is recorded, not fatal)
            return {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    return {"shares_pct": {str(k): float(v) for k, v in summary.items()}}


def main() -> int:
    logging.disable(logging.WARNING)
    out = {"hta_version": version("traceinsight"),
           "cases": [{"trace": case[0], "annotation": case[1], "instance": case[2], **measure(*case)} for case in CASES]}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
