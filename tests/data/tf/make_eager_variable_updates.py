"""Writes tests/data/tf/eager_variable_updates.xplane.pb: a real TF profiler capture (CPU) of a custom
training loop whose step is a tf.function (an MLP 64-256-256-10, Adam, batch 32) followed, in eager
Python, by an exponential moving average of the weights, one variable at a time
(ema.assign(0.99 * ema + 0.01 * w)), 6 steps marked with tf.profiler.experimental.Trace. Most of the
step's op time is those eager updates: the remedy said "run the step as a graph, with tf.function
around a custom step" to a step already in one, without naming the ops that run eagerly.

    python tests/data/tf/make_eager_variable_updates.py
Made with TF 2.21 and Keras 3.15 (the host file is named after the machine, "vm" here).
"""

from contextlib import nullcontext

import keras
import tensorflow as tf
from profiled import write_xspace


def main() -> None:
    tf.random.set_seed(0)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"),
                              keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
    averages = [tf.Variable(v) for v in model.trainable_variables]
    optimizer = keras.optimizers.Adam()

    @tf.function
    def train_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    x, y = tf.random.normal((32, 64)), tf.random.normal((32, 10))

    def loop(steps: int, marked: bool) -> None:
        for i in range(steps):
            with tf.profiler.experimental.Trace("train", step_num=i, _r=1) if marked else nullcontext():
                train_step(x, y)
                for average, weight in zip(averages, model.trainable_variables, strict=True):
                    average.assign(0.99 * average + 0.01 * weight)

    loop(3, marked=False)
    write_xspace("eager_variable_updates", lambda: loop(6, marked=True))


if __name__ == "__main__":
    main()
