"""Writes tests/data/tf/text_in_model.xplane.pb and text_in_pipeline.xplane.pb: real TF profiler captures (CPU,
one intra-op and one inter-op thread) of Keras 3's model.fit over 8 batches of 64 texts (40 words of a
5,000-word vocabulary) for a text classifier: TextVectorization, Embedding(5000, 64), average pooling, Dense.

- text_in_model: TextVectorization is the model's first layer, as Keras's text tutorials often write it:
  its string ops (StaticRegexReplace, StringSplitV2) and its vocabulary lookup (LookupTableFindV2) run in
  the training step, where XLA cannot compile them (Keras warns "Model doesn't support jit_compile=True"
  and runs without XLA).
- text_in_pipeline: the same layer applied in the tf.data pipeline (dataset.map), the model taking the
  integer ids: the string ops run on tf.data's threads.

    python tests/data/tf/make_text_vectorization.py
Made with TF 2.21 and Keras 3.15 on a 2-core AMD EPYC (Zen 4: AVX-512 with BF16, no AMX). Timed there
(model.fit over 64 batches, two runs each): 2.7 / 2.3 ms a batch with the layer in the model, 2.4 / 4.8 ms
with it in tf.data, 1.8 / 1.7 ms with it in tf.data and jit_compile=True.
"""

import keras
import numpy as np
import tensorflow as tf
from profiled import write_xspace

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)


def classifier(inputs: keras.Input, *front: keras.layers.Layer) -> keras.Model:
    model = keras.Sequential([inputs, *front, keras.layers.Embedding(5000, 64), keras.layers.GlobalAveragePooling1D(),
                              keras.layers.Dense(1)])
    model.compile("adam", keras.losses.BinaryCrossentropy(from_logits=True))
    return model


if __name__ == "__main__":
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(5000)]
    texts = np.array([" ".join(rng.choice(words, 40)) for _ in range(512)])
    labels = rng.integers(0, 2, 512)
    vectorize = keras.layers.TextVectorization(max_tokens=5000, output_sequence_length=40)
    vectorize.adapt(texts)
    raw = tf.data.Dataset.from_tensor_slices((texts[:, None], labels)).batch(64)
    ids = raw.map(lambda x, y: (vectorize(x), y)).prefetch(2)
    for name, model, data in (("text_in_model", classifier(keras.Input((1,), dtype="string"), vectorize), raw),
                              ("text_in_pipeline", classifier(keras.Input((40,), dtype="int64")), ids)):
        model.fit(data, epochs=1, verbose=0)  # traced and warm before the capture
        write_xspace(name, lambda m=model, d=data: m.fit(d, epochs=1, verbose=0))
