"""The TensorFlow LSTM variants: the same LSTM, same weights, run the ways TF offers.

All layer variants compute Keras' LSTM (gates i, f, c, o; one bias; zero initial state) on
batch-major input [batch, timesteps, input] and return every timestep's hidden state
[batch, timesteps, hidden]. Weights come from one seeded NumPy generator, so every variant
(and a test) can check it computes the same function.

What differs is how the work reaches the device (research/tf_profiler.md): the Keras layer is a
``tf.while_loop`` of small ops on CPU and the cuDNN kernel on GPU; ``implementation=1`` splits
the gate GEMMs into four; ``unroll`` copies the cell per timestep; mixed precision adds casts;
eager runs op by op from Python; ``BlockLSTMV2`` is one fused op for the whole sequence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf
from tracekit.collectors.sweep import LayerConfig

Array = Any  # a tf.Tensor or np.ndarray


@dataclass(frozen=True)
class Weights:
    """Keras LSTM weights: kernel [input, 4H], recurrent kernel [H, 4H], bias [4H], gates i f c o."""

    kernel: np.ndarray
    recurrent: np.ndarray
    bias: np.ndarray


def make_weights(config: LayerConfig, seed: int = 0, layer: int = 0) -> Weights:
    rng = np.random.default_rng(seed * 1000 + layer)
    inputs = config.input if layer == 0 else config.hidden
    scale = 1.0 / np.sqrt(config.hidden)  # nn.LSTM's init range: keeps gates out of saturation
    def uniform(*shape: int) -> np.ndarray:
        return rng.uniform(-scale, scale, shape).astype(np.float32)

    return Weights(uniform(inputs, 4 * config.hidden), uniform(config.hidden, 4 * config.hidden),
                   uniform(4 * config.hidden))


def make_input(config: LayerConfig, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    return rng.standard_normal((config.batch, config.timesteps, config.input)).astype(np.float32)


def keras_lstm(weights: Weights, config: LayerConfig, **kwargs: Any) -> Any:
    import keras

    layer = keras.layers.LSTM(config.hidden, return_sequences=True, **kwargs)
    layer.build((config.batch, config.timesteps, config.input))
    layer.set_weights([weights.kernel, weights.recurrent, weights.bias])
    return layer


def raw_while_lstm(weights: Weights) -> Callable[[Array], tf.Tensor]:
    """The LSTM cell in raw TF ops, stepped by ``tf.while_loop`` over a TensorArray."""
    kernel, recurrent, bias = (tf.constant(w) for w in (weights.kernel, weights.recurrent, weights.bias))

    def run(x: Array) -> tf.Tensor:
        x_tm = tf.transpose(x, (1, 0, 2))
        steps = tf.shape(x_tm)[0]
        batch, hidden = tf.shape(x_tm)[1], recurrent.shape[0]
        h = tf.zeros((batch, hidden))
        c = tf.zeros((batch, hidden))
        outputs = tf.TensorArray(tf.float32, size=steps)

        def body(t: tf.Tensor, h: tf.Tensor, c: tf.Tensor, outputs: tf.TensorArray) -> tuple:
            gates = tf.matmul(x_tm[t], kernel) + tf.matmul(h, recurrent) + bias
            i, f, g, o = tf.split(gates, 4, axis=1)
            c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
            h = tf.sigmoid(o) * tf.tanh(c)
            return t + 1, h, c, outputs.write(t, h)

        _, _, _, outputs = tf.while_loop(lambda t, *_: t < steps, body, (0, h, c, outputs))
        return tf.transpose(outputs.stack(), (1, 0, 2))

    return run


def block_lstm(weights: Weights) -> Callable[[Array], tf.Tensor]:
    """``tf.raw_ops.BlockLSTMV2``: the whole sequence in one fused op (same i f c o layout as Keras)."""
    w = tf.constant(np.concatenate([weights.kernel, weights.recurrent], axis=0))
    b = tf.constant(weights.bias)
    hidden = weights.recurrent.shape[0]
    peephole = tf.zeros((hidden,))

    def run(x: Array) -> tf.Tensor:
        x_tm = tf.transpose(x, (1, 0, 2))
        zeros = tf.zeros((tf.shape(x_tm)[1], hidden))
        outs = tf.raw_ops.BlockLSTMV2(seq_len_max=tf.cast(tf.shape(x_tm)[0], tf.int64), x=x_tm, cs_prev=zeros,
                                      h_prev=zeros, w=w, wci=peephole, wcf=peephole, wco=peephole, b=b,
                                      cell_clip=-1.0, use_peephole=False)
        return tf.transpose(outs[-1], (1, 0, 2))

    return run


def mixed_policy(gpu: bool) -> str:
    """mixed_float16 on GPU (the studies' AMP), mixed_bfloat16 on CPU."""
    return "mixed_float16" if gpu else "mixed_bfloat16"


@dataclass(frozen=True)
class LayerVariant:
    name: str
    description: str
    build: Callable[[Weights, LayerConfig, bool], Callable[[Array], tf.Tensor]]
    compile: str = "graph"  # eager | graph | xla
    mixed: bool = False


def _keras(**kwargs: Any) -> Callable[[Weights, LayerConfig, bool], Callable[[Array], tf.Tensor]]:
    def build(weights: Weights, config: LayerConfig, gpu: bool) -> Callable[[Array], tf.Tensor]:
        return keras_lstm(weights, config, **kwargs)

    return build


def _keras_mixed(weights: Weights, config: LayerConfig, gpu: bool) -> Callable[[Array], tf.Tensor]:
    return keras_lstm(weights, config, dtype=mixed_policy(gpu))


LAYER_VARIANTS: dict[str, LayerVariant] = {v.name: v for v in (
    LayerVariant("keras_lstm", "keras.layers.LSTM default in tf.function (cuDNN on GPU, while loop on CPU)", _keras()),
    LayerVariant("keras_no_cudnn", "keras LSTM with use_cudnn=False (the generic path on GPU too)",
                 _keras(use_cudnn=False)),
    LayerVariant("keras_impl1", "keras LSTM, use_cudnn=False, implementation=1: four gate GEMMs per step",
                 _keras(use_cudnn=False, implementation=1)),
    LayerVariant("keras_impl2", "keras LSTM, use_cudnn=False, implementation=2: one fused gate GEMM per step",
                 _keras(use_cudnn=False, implementation=2)),
    LayerVariant("keras_unroll", "keras LSTM with unroll=True: the cell copied per timestep, no while loop",
                 _keras(unroll=True)),
    LayerVariant("keras_mixed", "keras LSTM under mixed precision (mixed_float16 on GPU, mixed_bfloat16 on CPU)",
                 _keras_mixed, mixed=True),
    LayerVariant("keras_eager", "keras LSTM called eagerly, op by op from Python", _keras(), compile="eager"),
    LayerVariant("keras_xla", "keras LSTM in tf.function(jit_compile=True) (XLA)", _keras(), compile="xla"),
    LayerVariant("raw_while", "the LSTM cell in raw TF ops inside tf.while_loop, in tf.function",
                 lambda w, c, g: raw_while_lstm(w)),
    LayerVariant("block_lstm", "tf.raw_ops.BlockLSTMV2: one fused op for the sequence, in tf.function",
                 lambda w, c, g: block_lstm(w)),
)}


def compiled(fn: Callable[[Array], tf.Tensor], mode: str) -> Callable[[Array], tf.Tensor]:
    if mode == "eager":
        return fn
    return tf.function(fn, jit_compile=mode == "xla")
