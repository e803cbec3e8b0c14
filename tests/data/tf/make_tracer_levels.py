"""One Keras LSTM graph step (hidden 128, batch 16, 20 timesteps, one thread) profiled at TF's host
tracer level 2, the default, and at level 3: tracer_level2_keras_lstm.xplane.pb and
tracer_level3_keras_lstm.xplane.pb.

At level 2 TF's executor records only the ops it deems expensive (the MatMuls, Split), and runs the
inexpensive ones (BiasAdd, Sigmoid, AddV2, the loop's Merge/Switch/NextIteration) untraced inside
``ExecutorState::Process``; level 3 records them all (tracekit/analyze/untraced_ops.py). TF 2.21's
tf.profiler ignores ProfilerOptions, so level 3 is captured through a profiler server and xprof's
client: the collector's ``tf-host3`` profiler. Both captures come from the collector, quick preset.

    python tests/data/tf/make_tracer_levels.py
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
SHAPE = "cpu-fp32-b16-h128-i128-l1-t20"

if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "tracekit", "collect", "tf", "--variants", "keras_lstm", "--preset",
                        "quick", "--device", "cpu", "--profiler", "tf,tf-host3", "-o", tmp, "--no-progress"],
                       check=True)
        traces = Path(tmp) / "traces" / "tf" / "keras_lstm"
        shutil.copy(traces / f"{SHAPE}-tf.xplane.pb", HERE / "tracer_level2_keras_lstm.xplane.pb")
        shutil.copy(traces / f"{SHAPE}-tf-host3.xplane.pb", HERE / "tracer_level3_keras_lstm.xplane.pb")
