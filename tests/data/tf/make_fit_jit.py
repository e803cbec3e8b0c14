"""Writes tests/data/tf/fit_jit.xplane.pb: a real TF profiler capture of Keras's model.fit on the CPU
with jit_compile=True: a 64-256-256-10 Dense classifier, one epoch of 16 batches of 64. Each step is
one call of the train function, which runs as one XLA program (CpuExecutable::ExecuteAsyncOnStream,
HLO-named ops such as MatMul.14).

    python tests/data/tf/make_fit_jit.py
Made with TF 2.21 and Keras 3 (the host file is named after the machine, "vm" here).
"""

import keras
import numpy as np
from profiled import write_xspace

rng = np.random.default_rng(0)
x = rng.random((1024, 64), dtype=np.float32)
y = rng.integers(0, 10, 1024)
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"),
                          keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)
model.fit(x, y, batch_size=64, epochs=1, verbose=0)  # traced and compiled outside the capture
write_xspace("fit_jit", lambda: model.fit(x, y, batch_size=64, epochs=1, verbose=0))
