"""Writes tests/data/tf/keras_dropout_{p01,p0}.xplane.pb: real TF profiler captures of Keras's model.fit on
the CPU (2 intra-op threads, 1 inter-op): a 1-layer transformer encoder (embedding 8000 x 256,
MultiHeadAttention with 4 heads, FFN 1024 with gelu, LayerNormalization) with a Dense head, trained
with Adam on 4 batches of 16 sequences of 128 tokens; dropout 0.1 (attention's and two Dropout layers
per block) in p01, 0 in p0.

    python tests/data/tf/make_keras_dropout.py
Made with TF 2.21 and Keras 3 on a 2-core AMD EPYC. Unprofiled, the same model with 4 layers: 362-396
ms a batch with dropout 0.1, 313 ms with 0 (medians of 17 batches, two runs); under jit_compile=True
402-429 against 271-324 ms.
"""

import keras
import numpy as np
import tensorflow as tf
from profiled import write_xspace

tf.config.threading.set_intra_op_parallelism_threads(2)
tf.config.threading.set_inter_op_parallelism_threads(1)
rng = np.random.default_rng(0)
x = rng.integers(0, 8000, (16 * 4, 128))
y = rng.integers(0, 2, 16 * 4)


def model(rate: float) -> keras.Model:
    keras.utils.set_random_seed(0)
    inp = keras.Input((128,), dtype="int32")
    h = keras.layers.Embedding(8000, 256)(inp)
    for _ in range(1):
        a = keras.layers.MultiHeadAttention(4, 64, dropout=rate)(h, h)
        h = keras.layers.LayerNormalization()(h + keras.layers.Dropout(rate)(a))
        f = keras.layers.Dense(256)(keras.layers.Dropout(rate)(keras.layers.Dense(1024, activation="gelu")(h)))
        h = keras.layers.LayerNormalization()(h + f)
    m = keras.Model(inp, keras.layers.Dense(2)(keras.layers.GlobalAveragePooling1D()(h)))
    m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    m.fit(x, y, batch_size=16, epochs=1, verbose=0)  # traced outside the capture
    return m


for name, rate in (("keras_dropout_p01", 0.1), ("keras_dropout_p0", 0.0)):
    m = model(rate)
    write_xspace(name, lambda m=m: m.fit(x, y, batch_size=16, epochs=1, verbose=0))
