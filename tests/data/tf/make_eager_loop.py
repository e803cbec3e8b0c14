"""Writes tests/data/tf/eager_loop.xplane.pb: one real TF profiler capture of a custom training loop
(tf.GradientTape, eager) that marks each step with Trace("train", step_num=i, _r=1) inside
`for batch in dataset`, as TF's profiler guide shows. The dataset's map sleeps 5 ms per example
(a tf.py_function standing in for slow decoding), so each batch of 8 takes ~40 ms to fetch, in
IteratorGetNext between the marked steps, while a step itself takes ~1 ms: the loop is
data-loading-bound, and the steps alone do not show it.

    python tests/data/tf/make_eager_loop.py
Made with TF 2.21 and Keras 3 on this project's 2-core machine.
"""

import glob
import shutil
import tempfile
import time
from pathlib import Path

import tensorflow as tf

tf.random.set_seed(0)
model = tf.keras.Sequential([tf.keras.Input((32,)), tf.keras.layers.Dense(64, activation="relu"),
                             tf.keras.layers.Dense(4)])
optimizer = tf.keras.optimizers.SGD(0.01)


def slow_decode(x, y):
    x = tf.py_function(lambda t: (time.sleep(0.005), t)[1], [x], tf.float32)
    x.set_shape((32,))
    return x, y


features, labels = tf.random.normal((256, 32)), tf.random.uniform((256,), 0, 4, tf.int32)
data = tf.data.Dataset.from_tensor_slices((features, labels)).map(slow_decode).batch(8)


def train(steps: int) -> None:
    for i, (x, y) in enumerate(data.take(steps)):
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            with tf.GradientTape() as tape:
                logits = model(x)
                loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))


train(2)  # build the model and the optimizer's slots outside the capture
with tempfile.TemporaryDirectory() as tmp:
    tf.profiler.experimental.start(tmp)
    train(5)
    tf.profiler.experimental.stop()
    (written,) = glob.glob(f"{tmp}/plugins/profile/*/*.xplane.pb")
    shutil.copy(written, Path(__file__).with_name("eager_loop.xplane.pb"))
