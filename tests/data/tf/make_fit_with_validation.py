"""Writes tests/data/tf/fit_with_validation.xplane.pb: a real TF profiler capture of Keras's model.fit
on the CPU with validation data: a Dense classifier, 2 epochs of 8 training batches of 64, each
followed by 4 validation batches. Keras 3 names its train and test functions' tf.function alike
(multi_step_on_iterator), so the trace's 24 calls of that range mix 16 training steps (backward and
optimizer ops) and 8 validation steps (neither).

    python tests/data/tf/make_fit_with_validation.py
Made with TF 2.21 and Keras 3 (the host file is named after the machine, "vm" here).
"""

import shutil
import tempfile
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.random((512, 32), dtype=np.float32)
y = rng.integers(0, 10, 512)
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)])
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=64, epochs=1, verbose=0)  # traced and built outside the capture
with tempfile.TemporaryDirectory() as tmp:
    tf.profiler.experimental.start(tmp)
    model.fit(x, y, batch_size=64, epochs=2, validation_data=(x[:256], y[:256]), verbose=0)
    tf.profiler.experimental.stop()
    (written,) = Path(tmp).glob("plugins/profile/*/*.xplane.pb")
    shutil.copy(written, Path(__file__).with_name("fit_with_validation.xplane.pb"))
