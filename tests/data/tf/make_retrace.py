"""Writes tests/data/tf/retrace.xplane.pb: one real TF profiler capture of a tf.function that is
retraced on every call. Each of its 6 marked steps calls it with a different Python int, so each
call builds a new graph (tf.function-graph_building) and runs a new concrete function
(__inference_step_N).

    python tests/data/tf/make_retrace.py
Made with TF 2.21 on this project's 2-core machine.
"""

import glob
import shutil
import tempfile
from pathlib import Path

import tensorflow as tf

weights = tf.Variable(tf.random.normal((64, 64), seed=0))


@tf.function
def step(x, scale):
    return tf.reduce_sum(tf.tanh(x @ weights) * scale)


x = tf.random.normal((32, 64), seed=1)
step(x, 0)
with tempfile.TemporaryDirectory() as tmp:
    tf.profiler.experimental.start(tmp)
    for i in range(6):
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            step(x, i + 1)  # a Python int that changes: a new trace every call
    tf.profiler.experimental.stop()
    (written,) = glob.glob(f"{tmp}/plugins/profile/*/*.xplane.pb")
    shutil.copy(written, Path(__file__).with_name("retrace.xplane.pb"))
