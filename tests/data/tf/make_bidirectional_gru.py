"""Writes tests/data/tf/bidirectional_gru.xplane.pb: a real TF profiler capture (CPU) of Keras's fit
training a text classifier whose GRU sits in keras.layers.Bidirectional (Embedding with mask_zero, a
Bidirectional GRU of 16, a Dense logit), 2 batches of 16 sequences of 12 tokens. Keras names the
wrapped layers forward_gru_1 and backward_gru_1: the report took their per-timestep while loops for
an RNN(cell) or hand-written loop and gave that remedy instead of the Keras layer's.

    python tests/data/tf/make_bidirectional_gru.py
Made with TF 2.21 and Keras 3.15 (the host file is named after the machine, "vm" here).
"""

import keras
import numpy as np
import tensorflow as tf
from profiled import write_xspace


def main() -> None:
    tf.random.set_seed(0)
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, 500, (32, 12))
    tokens[:, 9:] = 0  # padding, masked
    labels = rng.integers(0, 2, (32,))
    model = keras.Sequential([keras.Input((12,), dtype="int32"), keras.layers.Embedding(500, 16, mask_zero=True),
                              keras.layers.Bidirectional(keras.layers.GRU(16)), keras.layers.Dense(1)])
    model.compile("adam", keras.losses.BinaryCrossentropy(from_logits=True))
    model.fit(tokens, labels, batch_size=16, epochs=1, verbose=0)  # traced and compiled before the capture
    write_xspace("bidirectional_gru", lambda: model.fit(tokens, labels, batch_size=16, epochs=1, verbose=0))


if __name__ == "__main__":
    main()
