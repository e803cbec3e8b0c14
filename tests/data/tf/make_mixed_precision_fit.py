"""Writes tests/data/tf/mixed_float16_fit.xplane.pb and mixed_bfloat16_fit.xplane.pb: real TF profiler
captures (CPU) of Keras's model.fit on an MLP (64-512-512-10, batch 32, 4 batches, one epoch) under
the two mixed-precision policies (tracekit.analyze.slow_forward). Unprofiled on a 2-core Xeon with
AVX-512 FP16 and AMX: 240 ms a batch under mixed_float16, 4.3 ms under mixed_bfloat16, 3.9 ms in
float32; under mixed_float16 the second layer's fused forward matmul takes 550x as long a call as
the layer's gradient products.

    python tests/data/tf/make_mixed_precision_fit.py
Made with TF 2.21 and Keras 3.
"""

import keras
import numpy as np
import tensorflow as tf
from profiled import write_xspace


def capture(policy: str) -> None:
    keras.mixed_precision.set_global_policy(policy)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(512, activation="relu"),
                              keras.layers.Dense(512, activation="relu"), keras.layers.Dense(10, dtype="float32")])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((128, 64)).astype("float32"), rng.integers(0, 10, 128)
    batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
    model.fit(batches, epochs=1, verbose=0)  # traced outside the capture
    write_xspace(f"{policy}_fit", lambda: model.fit(batches, epochs=1, verbose=0))


if __name__ == "__main__":
    capture("mixed_float16")
    capture("mixed_bfloat16")
