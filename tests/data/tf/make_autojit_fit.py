"""Writes tests/data/tf/autojit_fit.xplane.pb: a real TF profiler capture (CPU) of Keras's fit of an MLP
(64-256-10, Adam, batches of 32) with TF's XLA autoclustering on (TF_XLA_FLAGS=--tf_xla_auto_jit=2
--tf_xla_cpu_global_jit): clusters of the graph compile and run as XLA executables inside _XlaRun ops,
beside the ops left out of them. The report said "the step already runs as one XLA program
(jit_compile)": autoclustering runs parts of the step, not the step as one program.

    python tests/data/tf/make_autojit_fit.py
Made with TF 2.21 and Keras 3.15 (the host file is named after the machine, "vm" here).
"""

import os

os.environ["TF_XLA_FLAGS"] = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"  # read when TF loads

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from profiled import write_xspace  # noqa: E402


def main() -> None:
    tf.random.set_seed(0)
    rng = np.random.default_rng(0)
    x, y = rng.random((384, 64), dtype=np.float32), rng.integers(0, 10, 384)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)  # clusters compiled before the capture
    write_xspace("autojit_fit", lambda: model.fit(x, y, batch_size=32, epochs=1, verbose=0))


if __name__ == "__main__":
    main()
