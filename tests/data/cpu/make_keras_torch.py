"""Writes tests/data/cpu/keras_torch_{lstm,lstm_no_shapes,jit}.pt.trace.json.gz: real torch.profiler captures
(CPU, one thread, 3 steps marked) of Keras 3 on the torch backend training with model.train_on_batch.

- keras_torch_lstm (shapes recorded) and keras_torch_lstm_no_shapes: a keras.layers.LSTM (20 timesteps of
  32 features, hidden 64, batch 64) and a Dense head. On a CPU Keras runs the LSTM as a Python loop over
  timesteps that indexes its projected inputs (a 20x64x256 tensor) one timestep at a time: each index's
  backward, aten::select_backward, zero-fills a gradient of the whole tensor
  (tracekit/analyze/indexed_gradients.py).
- keras_torch_jit (shapes recorded): a 3-layer MLP (64-256-256-10, batch 256) compiled with
  model.compile(jit_compile=True): Keras compiles its train step with torch.compile, which breaks into
  many graphs: about 18 Torch-Compiled Regions a step, each after a TorchDynamo Cache Lookup (Dynamo's
  guard checks) of 60-80 µs, a quarter of the step.

    python tests/data/cpu/make_keras_torch.py
Made with torch 2.13.0 (CPU build) and keras 3.15.1 on a 2-core AMD EPYC (Zen 4: AVX-512 with BF16, no AMX).
"""

import os

os.environ["KERAS_BACKEND"] = "torch"  # before keras is imported

import keras  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from profiled import unprofiled_ms, write_capture  # noqa: E402


def capture(name: str, model: keras.Model, x: np.ndarray, y: np.ndarray, shapes: tuple[bool, ...] = (True,)) -> None:
    def step(_: int) -> None:
        model.train_on_batch(x, y)

    print(f"{name}: {unprofiled_ms(step, 10):.1f} ms a step unprofiled")
    for record_shapes in shapes:
        write_capture(name if record_shapes else f"{name}_no_shapes", step, active=3, record_shapes=record_shapes)


if __name__ == "__main__":
    torch.set_num_threads(1)
    keras.utils.set_random_seed(0)
    lstm = keras.Sequential([keras.Input((20, 32)), keras.layers.LSTM(64), keras.layers.Dense(1)])
    lstm.compile("adam", "mse")
    capture("keras_torch_lstm", lstm, np.random.rand(64, 20, 32).astype("float32"),
            np.random.rand(64, 1).astype("float32"), shapes=(True, False))
    mlp = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"),
                            keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
    mlp.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)
    capture("keras_torch_jit", mlp, np.random.rand(256, 64).astype("float32"), np.random.randint(0, 10, (256,)))
