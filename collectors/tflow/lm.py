"""The stacked LSTM language model of the TF/PyTorch/Julia comparison, in Keras.

Embedding (vocab 10001 -> 128), three LSTM layers of 256, a dense decoder to the vocabulary, on
sequences of 50 tokens in batches of 128. The study timed the forward pass per batch on CPU:
TF eager 0.596 s, TF graph 0.218 s.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tracekit.collectors.sweep import LMConfig


def make_model(config: LMConfig, seed: int = 0) -> Any:
    import keras

    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.layers.Embedding(config.vocab, config.embed)]
                             + [keras.layers.LSTM(config.hidden, return_sequences=True) for _ in range(config.layers)]
                             + [keras.layers.Dense(config.vocab)])
    model.build((config.batch, config.timesteps))
    return model


def make_batch(config: LMConfig, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random tokens and their next-token targets, [batch, timesteps] each."""
    rng = np.random.default_rng(seed + 1)
    tokens = rng.integers(0, config.vocab, (config.batch, config.timesteps + 1), dtype=np.int32)
    return tokens[:, :-1], tokens[:, 1:]
