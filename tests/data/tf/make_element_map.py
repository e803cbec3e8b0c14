"""Writes tests/data/tf/element_map_{map_fn,keras_map,vectorized}.xplane.pb: real TF profiler captures (CPU)
of a two-layer MLP (64-256-10, batch 32, SGD) written per sample and mapped over the batch inside a
tf.function training step, 3 steps marked (tracekit.analyze.element_map):

- ``element_map_map_fn``: ``tf.map_fn``: one loop iteration an element, and a gradient loop.
- ``element_map_keras_map``: ``keras.ops.map`` (tf.map_fn under Keras's TF backend).
- ``element_map_vectorized``: ``tf.vectorized_map``: the function turned into batched ops, no loop.

Prints each step unprofiled, and the same MLP written on the batch.

    python tests/data/tf/make_element_map.py
Made with TF 2.21 and Keras 3 on a 2-core AMD EPYC.
"""

import keras
import tensorflow as tf
from profiled import unprofiled_ms, write_steps


def training_step(mapper):
    keras.utils.set_random_seed(0)
    w1, w2 = tf.Variable(tf.random.normal((64, 256))), tf.Variable(tf.random.normal((256, 10)))
    x, y = tf.random.normal((32, 64)), tf.random.uniform((32,), 0, 10, tf.int32)
    opt = keras.optimizers.SGD(0.01)

    def per_sample(xi: tf.Tensor) -> tf.Tensor:
        return tf.linalg.matvec(tf.transpose(w2), tf.nn.relu(tf.linalg.matvec(tf.transpose(w1), xi)))

    @tf.function
    def step() -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = mapper(per_sample, x) if mapper else tf.nn.relu(x @ w1) @ w2
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        opt.apply_gradients(zip(tape.gradient(loss, [w1, w2]), [w1, w2], strict=True))
        return loss
    return step


def main() -> None:
    print(f"on the batch: {unprofiled_ms(training_step(None)):.2f} ms a step")
    for name, mapper in (("element_map_map_fn", tf.map_fn), ("element_map_keras_map", keras.ops.map),
                         ("element_map_vectorized", tf.vectorized_map)):
        step = training_step(mapper)
        print(f"{name}: {unprofiled_ms(step):.2f} ms a step")
        write_steps(name, step)


if __name__ == "__main__":
    main()
