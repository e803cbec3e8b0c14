"""Writes tests/data/tf/input_{py_map,parallel_py_map,generator,parallel_tf_map}.xplane.pb: real TF profiler
captures of Keras fit (an MLP, 64-256-10, Adam, batch 32) fed by a tf.data pipeline slower than the
step, 7 batches profiled after one warm epoch; Keras' fit adds its own prefetch at the pipeline's root.

- input_py_map: from_tensor_slices -> batch(32) -> map(tf.py_function sleeping 8 ms) on one thread:
  the map stage makes each batch (Iterator::Root::Prefetch::Map::BatchV2::TensorSlice), in Python.
- input_parallel_py_map: the same map with num_parallel_calls=4 (ParallelMapV2): its calls run at
  once but hold Python's GIL while they compute (a 2 ms Python loop a batch, then the 6 ms sleep).
- input_generator: from_generator over a Python generator doing 6 ms of work a batch, then a parallel
  TF-op map: the source stage (FlatMap over the generator) makes the batches.
- input_parallel_tf_map: from_tensor_slices -> map(an RFFT of 4,096 points, TF ops, num_parallel_calls=2)
  -> batch(32): the TF-op map stage is the slowest, and runs in parallel already.

    python tests/data/tf/make_input_pipelines.py [NAME ...]
Made with TF 2.21 (Keras 3) on a 2-core Intel Xeon (Sapphire Rapids class: AVX-512, AMX).
"""

import sys
import time

import numpy as np
import tensorflow as tf
from profiled import write_xspace


def python_work(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:  # holds the GIL, as a Python transform does
        pass


def sleepy(x, y):
    time.sleep(0.008)
    return x, y


def busy_then_sleepy(x, y):
    python_work(0.002)
    time.sleep(0.006)
    return x, y


def py_map(fn):
    def mapped(x, y):
        a, b = tf.py_function(fn, [x, y], [tf.float32, tf.int64])
        a.set_shape([None, 64])
        b.set_shape([None])
        return a, b
    return mapped


def dataset(name: str) -> tf.data.Dataset:
    rng = np.random.default_rng(0)
    xs, ys = rng.random((288, 64), np.float32), rng.integers(0, 10, 288)
    slices = tf.data.Dataset.from_tensor_slices((xs, ys))
    if name == "input_py_map":
        return slices.batch(32).map(py_map(sleepy))
    if name == "input_parallel_py_map":
        return slices.batch(32).map(py_map(busy_then_sleepy), num_parallel_calls=4)
    if name == "input_generator":
        def batches():
            for i in range(0, 288, 32):
                python_work(0.006)
                yield xs[i:i + 32], ys[i:i + 32]
        spec = (tf.TensorSpec((None, 64), tf.float32), tf.TensorSpec((None,), tf.int64))
        return tf.data.Dataset.from_generator(batches, output_signature=spec).map(
            lambda x, y: (x * 2.0, y), num_parallel_calls=2)
    if name == "input_parallel_tf_map":
        def spectrum(x, y):
            wave = tf.tile(x, [64])
            return tf.math.abs(tf.signal.rfft(wave))[:64] + tf.math.abs(tf.signal.rfft(wave[::-1]))[:64], y
        return slices.map(spectrum, num_parallel_calls=2).batch(32)
    raise ValueError(name)


def capture(name: str) -> None:
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(256, activation="relu"),
                                 tf.keras.layers.Dense(10)])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    ds = dataset(name)
    model.fit(ds, epochs=1, verbose=0)
    write_xspace(name, lambda: model.fit(ds.take(7), epochs=1, verbose=0))


if __name__ == "__main__":
    for name in sys.argv[1:] or ["input_py_map", "input_parallel_py_map", "input_generator", "input_parallel_tf_map"]:
        capture(name)
