"""Made fetch_in_step.xplane.pb: a TF custom training loop that fetches its batch inside each marked step.

    python tests/data/tf/make_fetch_in_step.py OUT_DIR

A tf.function train step (GradientTape, SGD) on a small Dense model, fed by a tf.data pipeline that
maps an RFFT over each example (num_parallel_calls=2) and prefetches. Each step is a
``tf.profiler.experimental.Trace("train", step_num=i)`` around ``next(it)`` and the step call, so
the eager ``IteratorGetNext`` (~100 µs a call) is inside the steps. Captured with TF 2.21 on a 2-core
Xeon: the fetch took 7% of the step with no compute op running, and was read as an op of no class
doing long work of its own (8% of the step "counted as dispatch").
"""

import sys

import tensorflow as tf


def main(out: str) -> None:
    tf.random.set_seed(0)
    x, y = tf.random.normal((512, 32)), tf.random.normal((512, 1))

    def spectrum(a, b):
        return tf.math.abs(tf.signal.rfft(a))[:17], b

    ds = tf.data.Dataset.from_tensor_slices((x, y)).map(spectrum, num_parallel_calls=2).batch(32).prefetch(2).repeat()
    model = tf.keras.Sequential([tf.keras.layers.Input((17,)), tf.keras.layers.Dense(64, activation="relu"),
                                 tf.keras.layers.Dense(1)])
    opt = tf.keras.optimizers.SGD(0.01)

    @tf.function
    def train_step(a, b):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(a) - b) ** 2)
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables, strict=True))
        return loss

    it = iter(ds)
    for _ in range(2):
        train_step(*next(it))
    tf.profiler.experimental.start(out)
    for i in range(6):
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            a, b = next(it)
            train_step(a, b)
    tf.profiler.experimental.stop()


if __name__ == "__main__":
    main(sys.argv[1])
