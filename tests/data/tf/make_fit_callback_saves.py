"""Writes tests/data/tf/fit_callback_saves.xplane.pb: a real TF profiler capture (CPU) of Keras's fit of an
MLP (64-512-512-10, Adam, batches of 32) with a callback that saves the weights (model.save_weights to
an .h5 file) after every 4th batch, 16 batches captured from the callbacks. Between the steps (calls of
multi_step_on_iterator) the loop runs the callbacks, where the trace records neither op nor Python frame:
53% of the loop, which the report named only "the steps cover 47% of the loop ... in framework ops 13%"
and judged the steps alone, with no remedy for it.

    python tests/data/tf/make_fit_callback_saves.py
Made with TF 2.21 and Keras 3.15 (the host file is named after the machine, "vm" here).
"""

import tempfile
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from profiled import HERE


class SaveEvery4(keras.callbacks.Callback):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if batch % 4 == 3:
            self.model.save_weights(self.path)


class Capture(keras.callbacks.Callback):
    """Profile batches 4 to 19 of the fit."""

    def __init__(self, logdir: str) -> None:
        super().__init__()
        self.logdir = logdir

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        if batch == 4:
            tf.profiler.experimental.start(self.logdir)

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if batch == 19:
            tf.profiler.experimental.stop()


def main() -> None:
    tf.random.set_seed(0)
    rng = np.random.default_rng(0)
    x, y = rng.random((640, 64), dtype=np.float32), rng.integers(0, 10, 640)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(512, activation="relu"),
                              keras.layers.Dense(512, activation="relu"), keras.layers.Dense(10)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with tempfile.TemporaryDirectory() as tmp:
        model.fit(x, y, batch_size=32, epochs=1, verbose=0)  # traced and compiled before the capture
        model.fit(x, y, batch_size=32, epochs=1, verbose=0,
                  callbacks=[SaveEvery4(f"{tmp}/model.weights.h5"), Capture(f"{tmp}/logs")])
        (written,) = Path(tmp, "logs").glob("plugins/profile/*/*.xplane.pb")
        (HERE / "fit_callback_saves.xplane.pb").write_bytes(written.read_bytes())


if __name__ == "__main__":
    main()
