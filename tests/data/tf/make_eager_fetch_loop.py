"""Writes tests/data/tf/eager_fetch_loop.xplane.pb: a real TF profiler capture (CPU) of a custom training
loop run eagerly (tf.GradientTape, no tf.function) over ``dataset.take(10)`` of a 128-256-10 Dense
classifier, batch 64, with no step markers: no Trace(step_num=...) and no function call per step. Each
iteration begins with the iterator's ``IteratorGetNext``; an 11th fetch finds the data exhausted.

    python tests/data/tf/make_eager_fetch_loop.py
Made with TF 2.21 and Keras 3 on this project's 2-core machine.
"""

import keras
import numpy as np
import tensorflow as tf
from profiled import write_xspace

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
rng = np.random.default_rng(0)
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((128,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
optimizer = keras.optimizers.SGD(0.01)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
dataset = tf.data.Dataset.from_tensor_slices((rng.standard_normal((64 * 30, 128), dtype=np.float32),
                                              rng.integers(0, 10, 64 * 30))).batch(64)


def train_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


def loop() -> None:
    for x, y in dataset.take(10):
        train_step(x, y)


for x, y in dataset.take(3):  # the optimizer's variables built outside the capture
    train_step(x, y)
write_xspace("eager_fetch_loop", loop)
