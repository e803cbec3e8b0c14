"""Writes tests/data/cpu/keras_torch_lstm{,_no_shapes}.pt.trace.json.gz: real torch.profiler captures (CPU,
one thread, 3 steps marked) of Keras 3 on the torch backend training a keras.layers.LSTM (20 timesteps of
32 features, hidden 64, batch 64) and a Dense head with model.train_on_batch, with and without shapes
recorded. On a CPU Keras runs the LSTM as a Python loop over timesteps that indexes its projected inputs
(a 20x64x256 tensor) one timestep at a time: each index's backward, aten::select_backward, zero-fills a
gradient of the whole tensor (tracekit/analyze/indexed_gradients.py).

    python tests/data/cpu/make_keras_torch_lstm.py
Made with torch 2.13.0 (CPU build) and keras 3.15.1 on a 2-core AMD EPYC (Zen 4: AVX-512 with BF16, no AMX).
"""

import os

os.environ["KERAS_BACKEND"] = "torch"  # before keras is imported

import keras  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from profiled import unprofiled_ms, write_capture  # noqa: E402

if __name__ == "__main__":
    torch.set_num_threads(1)
    keras.utils.set_random_seed(0)
    x = np.random.rand(64, 20, 32).astype("float32")
    y = np.random.rand(64, 1).astype("float32")
    model = keras.Sequential([keras.Input((20, 32)), keras.layers.LSTM(64), keras.layers.Dense(1)])
    model.compile("adam", "mse")

    def step(_: int) -> None:
        model.train_on_batch(x, y)

    print(f"{unprofiled_ms(step, 10):.1f} ms a step unprofiled")
    write_capture("keras_torch_lstm", step, active=3, record_shapes=True)
    write_capture("keras_torch_lstm_no_shapes", step, active=3)
