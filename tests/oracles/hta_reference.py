"""Record Holistic Trace Analysis numbers for the traces in ../shared/traces/hta (test oracle).

HTA is not a tracekit dependency (it pins Jupyter and plotly); run this once in a separate
virtual environment and commit the JSON it writes:

    python -m venv /tmp/hta && /tmp/hta/bin/pip install holistictraceanalysis==0.5.0
    /tmp/hta/bin/python tests/oracles/hta_reference.py > tests/oracles/hta_0.5.0.json

HTA_DISABLE_NS_ROUNDING=1 is set: by default HTA rounds ns-resolution traces (start up, end
down, to whole µs), which shrinks every event and invents idle time between back-to-back kernels;
tracekit keeps the exact ns values, so the oracle is HTA reading the same exact values.

For each trace: HTA's temporal breakdown (idle / compute / non-compute / kernel time, µs) with
its default ``include_last_profiler_step=False``, and its CUDA kernel launch statistics (count and
sums of cpu_duration, gpu_duration, launch_delay, µs).
"""

from __future__ import annotations

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
    "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "df_index_resolver/df_index_resolver.json.gz",
    "nccl_parser_config/nccl_data.json.gz",
    "negative_queue_length_values_check/rank0.json.gz",
    "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "trace_diff/control/control.json.gz",
    "with_gpu_user_annotation/step_based_trace_2543932.json.gz",
]


def measure(rel: str) -> dict:
    with tempfile.TemporaryDirectory() as d:
        # HTA reads every trace in a directory; give it this one alone.
        shutil.copy(SHARED / rel, Path(d) / Path(rel).name)
        ta = TraceAnalysis(trace_dir=d)
        rank = next(iter(ta.t.traces))
        tb = ta.get_temporal_breakdown(visualize=False).iloc[0]
        launch = ta.get_cuda_kernel_launch_stats(ranks=[rank], visualize=False)[rank]
    return {
        "idle_time_us": float(tb["idle_time(us)"]),
        "compute_time_us": float(tb["compute_time(us)"]),
        "non_compute_time_us": float(tb["non_compute_time(us)"]),
        "kernel_time_us": float(tb["kernel_time(us)"]),
        "launch_count": int(len(launch)),
        "launch_cpu_duration_sum_us": float(launch["cpu_duration"].sum()),
        "launch_gpu_duration_sum_us": float(launch["gpu_duration"].sum()),
        "launch_delay_sum_us": float(launch["launch_delay"].sum()),
    }


def main() -> int:
    logging.disable(logging.WARNING)
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    out = {"hta_version": version("holistictraceanalysis"), "env": {"HTA_DISABLE_NS_ROUNDING": "1"}, "traces": {rel: measure(rel) for rel in TRACES}}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
