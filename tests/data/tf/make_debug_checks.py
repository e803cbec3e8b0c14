"""Writes tests/data/tf/debug_{check_numerics,dump_info,check_loss}.xplane.pb: real TF profiler
captures (CPU) of a training loop with a TF debugging aid left on (tracekit.analyze.tf_debug_checks):

- ``debug_check_numerics``: ``tf.debugging.enable_check_numerics()``, then Keras's fit of an MLP
  (128-256-256-10, batch 64, Adam), 4 batches: a CheckNumericsV2 or DebugNumericSummaryV2 op on op outputs.
- ``debug_dump_info``: ``tf.debugging.experimental.enable_dump_debug_info(..., "FULL_HEALTH")``, then a
  tf.function training step of the same MLP, 3 steps marked: DebugIdentityV2 and DebugNumericSummaryV2 ops.
- ``debug_check_loss``: that training step checking its loss and its logits with
  ``tf.debugging.check_numerics`` (3 calls, 6 CheckNumerics ops a step with their gradients', a choice that
  costs nothing: 0.55 ms a step against 0.52), 3 steps marked.

Each runs in its own process (both settings are global). Prints each step unprofiled, with and without.

    python tests/data/tf/make_debug_checks.py
Made with TF 2.21 and Keras 3 on a 2-core AMD EPYC.
"""

import subprocess
import sys
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf
from profiled import unprofiled_ms, write_steps, write_xspace


def mlp() -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((128,)), keras.layers.Dense(256, activation="relu"),
                              keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def batch_ms(model: keras.Model, x: np.ndarray, y: np.ndarray) -> float:
    model.fit(x, y, batch_size=64, verbose=0)
    start = time.perf_counter()
    model.fit(x, y, batch_size=64, verbose=0)
    return (time.perf_counter() - start) / (len(x) // 64) * 1e3


def check_numerics() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((64 * 20, 128)).astype("float32"), rng.integers(0, 10, 64 * 20)
    plain = batch_ms(mlp(), x, y)
    tf.debugging.enable_check_numerics()
    model = mlp()
    print(f"debug_check_numerics: {batch_ms(model, x, y):.2f} ms a batch, {plain:.2f} without")
    write_xspace("debug_check_numerics", lambda: model.fit(x[:256], y[:256], batch_size=64, verbose=0))


def dump_info(check_loss: bool = False) -> None:
    model, opt = mlp(), keras.optimizers.Adam()
    x, y = tf.random.normal((64, 128)), tf.random.uniform((64,), 0, 10, tf.int32)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def make_step():
        @tf.function
        def step() -> tf.Tensor:
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss = loss_fn(y, logits)
                if check_loss:
                    logits = tf.debugging.check_numerics(logits, "logits")
                    loss = tf.debugging.check_numerics(loss, "loss") + 0.0 * tf.reduce_sum(logits)
                    loss = tf.debugging.check_numerics(loss, "checked loss")
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables,
                                    strict=True))
            return loss
        return step

    plain = unprofiled_ms(make_step())
    if check_loss:
        step = make_step()
        print(f"debug_check_loss: {unprofiled_ms(step):.2f} ms a step, {plain:.2f} without")
        write_steps("debug_check_loss", step)
        return
    with tempfile.TemporaryDirectory() as dump:
        tf.debugging.experimental.enable_dump_debug_info(dump, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
        step = make_step()
        print(f"debug_dump_info: {unprofiled_ms(step):.2f} ms a step, {plain:.2f} without")
        write_steps("debug_dump_info", step)
        tf.debugging.experimental.disable_dump_debug_info()


if __name__ == "__main__":
    if len(sys.argv) == 2:
        {"check_numerics": check_numerics, "dump_info": dump_info,
         "check_loss": lambda: dump_info(check_loss=True)}[sys.argv[1]]()
    else:
        for which in ("check_numerics", "dump_info", "check_loss"):
            subprocess.run([sys.executable, __file__, which], check=True)
