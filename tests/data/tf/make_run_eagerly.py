"""Writes tests/data/tf/run_eagerly.xplane.pb: a real TF profiler capture (CPU) of Keras's model.fit of a
64-256-256-10 Dense classifier compiled with run_eagerly=True, one epoch of 4 batches of 64: the train
step runs eagerly, each op an EagerExecute call. Timed here unprofiled over 2 epochs of 1,024 samples:
30.9 ms a batch with run_eagerly=True, 5.4 ms without.

    python tests/data/tf/make_run_eagerly.py
Made with TF 2.21 and Keras 3 (the host file is named after the machine, "vm" here).
"""

import keras
import numpy as np
from profiled import write_xspace

rng = np.random.default_rng(0)
x = rng.random((256, 64), dtype=np.float32)
y = rng.integers(0, 10, 256)
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"),
                          keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), run_eagerly=True)
model.fit(x, y, batch_size=64, epochs=1, verbose=0)  # the optimizer's variables built outside the capture
write_xspace("run_eagerly", lambda: model.fit(x, y, batch_size=64, epochs=1, verbose=0))
