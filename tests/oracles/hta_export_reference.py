"""Record what HTA (traceinsight 0.6.1) computes on tracekit's exports of nsys and XSpace traces.

HTA cannot open nsys SQLite or TF XSpace; `tracekit export` makes Kineto JSON of them, and this
script asks HTA for its temporal breakdown of each export. tests/test_export.py checks tracekit's
own numbers on the *original* traces against these, and the export's sha256 against the one HTA
read (a changed export needs a new recording).

Run from tracekit's dev venv, with HTA in a separate one (it pins its own pandas and plotly):

    python -m venv /tmp/hta && /tmp/hta/bin/pip install traceinsight==0.6.1
    HTA_PYTHON=/tmp/hta/bin/python python tests/oracles/hta_export_reference.py > tests/oracles/hta_export_0.6.1.json

HTA_DISABLE_NS_ROUNDING=1 as in hta_reference.py: HTA reads the exact ns values.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tracekit.export.kineto_json import export_table
from tracekit.ingest import load

SHARED = Path(__file__).resolve().parents[3] / "shared" / "traces"
TRACES = [
    "nsys/abacus_pytorch_cnn_titanrtx_nsys2023.4.sqlite",
    "nsys/dlprof_pytorch_cnn_rtx2070s_nsys2022.1.sqlite",
    "nsys/keras_tf_darknet53_nsys2023.4.sqlite",
    "nsys/nvfuser_matmul_nsys2024.6.sqlite",
    "xprof/tf_bert_8xV100_gpu_multi_worker.xplane.pb",
]

HTA_MEASURE = r"""
import json, logging, sys
logging.disable(logging.WARNING)
from importlib.metadata import version
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1])
tb = ta.get_temporal_breakdown(visualize=False).iloc[0]
print(json.dumps({"hta_version": version("traceinsight"),
                  "idle_time_us": float(tb["idle_time(us)"]), "compute_time_us": float(tb["compute_time(us)"]),
                  "non_compute_time_us": float(tb["non_compute_time(us)"]), "kernel_time_us": float(tb["kernel_time(us)"]),
                  "idle_pct": float(tb["idle_time_pctg"]), "compute_pct": float(tb["compute_time_pctg"]),
                  "non_compute_pct": float(tb["non_compute_time_pctg"])}))
"""


def export_sha256(path: Path) -> str:
    """sha256 of the uncompressed export of ``path`` (what HTA read)."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "export.json"
        export_table(load(path), out)
        return hashlib.sha256(out.read_bytes()).hexdigest()


def measure(rel: str, hta_python: str) -> dict:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "export.json"
        export_table(load(SHARED / rel), out)
        digest = hashlib.sha256(out.read_bytes()).hexdigest()
        env = {**os.environ, "HTA_DISABLE_NS_ROUNDING": "1"}
        run = subprocess.run([hta_python, "-c", HTA_MEASURE, d], capture_output=True, text=True, env=env)
    if run.returncode != 0:  # recorded: HTA failing on an export is a finding too
        return {"export_sha256": digest, "hta_error": run.stderr.strip().splitlines()[-1][:300]}
    return {"export_sha256": digest, **json.loads(run.stdout.strip().splitlines()[-1])}


def main() -> int:
    hta_python = os.environ.get("HTA_PYTHON", "/tmp/hta/bin/python")
    traces = {rel: measure(rel, hta_python) for rel in TRACES}
    json.dump({"env": {"HTA_DISABLE_NS_ROUNDING": "1"}, "traces": traces}, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
