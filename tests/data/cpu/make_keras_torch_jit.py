"""Writes tests/data/cpu/keras_torch_jit.pt.trace.json.gz: a real torch.profiler capture (CPU, one thread,
shapes recorded, 3 steps marked) of Keras 3 on the torch backend training a 3-layer MLP (64-256-256-10,
batch 256) with model.compile(jit_compile=True) and model.train_on_batch. Keras compiles its train step
with torch.compile, which breaks into many graphs: each call runs about 18 Torch-Compiled Regions a step,
each after a TorchDynamo Cache Lookup (Dynamo's guard checks) of about 80 µs, a quarter of the step.

    python tests/data/cpu/make_keras_torch_jit.py
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
    x = np.random.rand(256, 64).astype("float32")
    y = np.random.randint(0, 10, (256,))
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"),
                              keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)

    def step(_: int) -> None:
        model.train_on_batch(x, y)

    print(f"{unprofiled_ms(step, 10):.1f} ms a step unprofiled")
    write_capture("keras_torch_jit", step, active=3, record_shapes=True)
