"""Writes two real TF profiler captures of a custom training loop that marks no step (no
``step_num``), each iteration reading its batch from tf.data and calling a ``tf.function``:

* ``unnumbered_trace.xplane.pb``: each iteration wrapped in ``Trace("train_step")``, the name of
  the tf.function too, so TF's TraceMe of the function call (named after the Python function) sits
  inside the program's range of the same name;
* ``function_loop.xplane.pb``: no range of the program's own, only the tf.function's calls.

Neither has step rows as read; tracekit takes the calls as steps (tracekit.ingest.step_inference).

    python tests/data/tf/make_unnumbered_loop.py
Made with TF 2.21 on this project's 2-core machine.
"""

import glob
import shutil
import tempfile
from pathlib import Path

import tensorflow as tf

tf.random.set_seed(0)
model = tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(128, activation="relu"),
                             tf.keras.layers.Dense(10)])
optimizer = tf.keras.optimizers.SGD(0.01)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
data = tf.data.Dataset.from_tensor_slices((tf.random.normal((640, 64), seed=1),
                                           tf.random.uniform((640,), maxval=10, dtype=tf.int32, seed=2)))
data = data.batch(32).repeat()


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


batches = iter(data)
train_step(*next(batches))  # traced and run once before the capture
for out, ranged in (("unnumbered_trace.xplane.pb", True), ("function_loop.xplane.pb", False)):
    with tempfile.TemporaryDirectory() as tmp:
        tf.profiler.experimental.start(tmp)
        for _ in range(8):
            x, y = next(batches)
            if ranged:
                with tf.profiler.experimental.Trace("train_step"):
                    train_step(x, y)
            else:
                train_step(x, y)
        tf.profiler.experimental.stop()
        (written,) = glob.glob(f"{tmp}/plugins/profile/*/*.xplane.pb")
        shutil.copy(written, Path(__file__).with_name(out))
