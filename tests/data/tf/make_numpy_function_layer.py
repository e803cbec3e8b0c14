"""Writes tests/data/tf/numpy_function_layer.xplane.pb: a real TF profiler capture (CPU) of Keras's
model.fit of a model whose first layer calls NumPy through tf.numpy_function (a PyFunc op inside the
train step's graph), then Dense 256 and 10: one epoch of 8 batches of 64. Compiling that model with
jit_compile=True fails (tf2xla cannot convert PyFunc); timed here unprofiled over 2 epochs of 4,096
samples: 2.44 ms a batch with the NumPy layer, 2.62 ms with the same features as TF ops.

    python tests/data/tf/make_numpy_function_layer.py
Made with TF 2.21 and Keras 3 (the host file is named after the machine, "vm" here).
"""

import keras
import numpy as np
import tensorflow as tf
from profiled import write_xspace


def numpy_features(a: np.ndarray) -> np.ndarray:
    return np.tanh(a - a.mean(axis=1, keepdims=True)) + np.sort(a, axis=1)


class NumpyLayer(keras.layers.Layer):
    def call(self, a):
        return tf.ensure_shape(tf.numpy_function(numpy_features, [a], tf.float32), a.shape)


rng = np.random.default_rng(0)
x = rng.random((512, 64), dtype=np.float32)
y = rng.integers(0, 10, 512)
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((64,)), NumpyLayer(), keras.layers.Dense(256, activation="relu"),
                          keras.layers.Dense(10)])
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=64, epochs=1, verbose=0)  # traced outside the capture
write_xspace("numpy_function_layer", lambda: model.fit(x, y, batch_size=64, epochs=1, verbose=0))
