"""Writes tests/data/jax/keras_jax_fit.xplane.pb: a real jax.profiler capture on CPU (the Python tracer
off) of Keras 3's ``fit`` on the JAX backend: an MLP (32 -> 256 -> 256 -> 10, dropout 0.1) trained
with Adam for one epoch of 32 batches of 64, after a first epoch outside the profile (compilation).
No step is marked: Keras's JAX trainer records none, and each batch's only range is its jitted
``PjitFunction(train_step)`` call, which returns once the step is dispatched (about 60 µs) while
XLA's threads run the step's ops. The dispatches run ahead of the work: between two calls lie 0 to
296 ops, and most of the epoch's ops run after the last call, so neither the calls nor the windows
between them are the steps.

Run in a separate venv with jax and keras installed (tracekit depends on neither):
    python -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax keras
    /tmp/jaxvenv/bin/python tests/data/jax/make_keras_jax_fit.py
Made with jax/jaxlib 0.10.2, keras 3 (KERAS_BACKEND=jax).
"""

import os

os.environ["KERAS_BACKEND"] = "jax"

import keras  # noqa: E402
import numpy as np  # noqa: E402
from profiled import write_xspace  # noqa: E402


def main() -> None:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dropout(0.1),
                              keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x, y = rng.random((2048, 32), dtype=np.float32), rng.integers(0, 10, 2048)
    model.fit(x, y, batch_size=64, epochs=1, verbose=0)  # compiles the step
    write_xspace("keras_jax_fit", lambda: model.fit(x, y, batch_size=64, epochs=1, verbose=0), python_tracer=False)


if __name__ == "__main__":
    main()
