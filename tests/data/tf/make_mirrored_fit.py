"""Writes tests/data/tf/mirrored_fit.xplane.pb: one real TF profiler capture of Keras's model.fit
under tf.distribute.MirroredStrategy on two logical CPU devices (a Dense classifier, 6 batches of
a tf.data pipeline). Each step all-reduces the gradients between the two replicas with
CollectiveReduceV2 ops, which TF records on "collective_ops/..." lines from their start to their
done callback: the host collectives tests/test_verdicts.py checks.

    python tests/data/tf/make_mirrored_fit.py
Made with TF 2.21 and Keras 3 on this project's 2-core machine.
"""

import glob
import shutil
import tempfile
from pathlib import Path

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(256, activation="relu"),
                                 tf.keras.layers.Dense(256, activation="relu"), tf.keras.layers.Dense(4)])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
tf.random.set_seed(0)
x, y = tf.random.normal((384, 64)), tf.random.uniform((384,), 0, 4, tf.int32)
data = tf.data.Dataset.from_tensor_slices((x, y)).batch(64).prefetch(2)
model.fit(data, epochs=1, verbose=0)  # trace and compile the step outside the capture
with tempfile.TemporaryDirectory() as tmp:
    tf.profiler.experimental.start(tmp)
    model.fit(data, epochs=1, verbose=0)
    tf.profiler.experimental.stop()
    (written,) = glob.glob(f"{tmp}/plugins/profile/*/*.xplane.pb")
    shutil.copy(written, Path(__file__).with_name("mirrored_fit.xplane.pb"))
