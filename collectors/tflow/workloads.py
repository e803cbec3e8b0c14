"""TensorFlow variants at one config as ``Workload``s.

Phases are TraceMe ranges ``phase::NAME`` (what the TF profiler records) and NVTX ranges; steps
are TraceMe ``train`` events with ``step_num`` (the TF profiler's step marker) and NVTX ``step#N``.
The training step runs its phases as separate graph pieces under one GradientTape (forward and
loss in ``tf.function``, then ``tape.gradient``, then the optimizer), so each phase is a range;
a single ``tf.function`` around the whole step would run the phases' Python only when tracing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf
from tracekit.collectors.phases import nvtx_range
from tracekit.collectors.sweep import LayerConfig, LMConfig
from tracekit.collectors.tflow import lm as lm_model
from tracekit.collectors.tflow.variants import LAYER_VARIANTS, compiled, make_input, make_weights
from tracekit.collectors.workload import Workload

LM_VARIANTS = {
    "lm_forward": "stacked LSTM language model, forward pass in tf.function (graph)",
    "lm_forward_eager": "the language model's forward pass, eager",
    "lm_train": "the language model, training step: forward, loss, backward (GradientTape), SGD step",
}
VARIANTS: dict[str, str] = {**{name: v.description for name, v in LAYER_VARIANTS.items()}, **LM_VARIANTS}


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    with nvtx_range(name), tf.profiler.experimental.Trace(f"phase::{name}"):
        yield


def step_marker(number: int) -> contextlib.AbstractContextManager[Any]:
    return tf.profiler.experimental.Trace("train", step_num=number, _r=1)


def variant_dtype(variant: str, gpu: bool) -> str:
    v = LAYER_VARIANTS.get(variant)
    if v is not None and v.mixed:
        return "fp16" if gpu else "bf16"
    return "fp32"


def build(variant: str, config: dict[str, int], gpu: bool, seed: int = 0) -> Workload:
    if variant in LM_VARIANTS:
        return _build_lm(variant, LMConfig(**config), seed)
    v = LAYER_VARIANTS[variant]
    layer = LayerConfig(**config)
    fn = compiled(v.build(make_weights(layer, seed), layer, gpu), v.compile)
    x = tf.constant(make_input(layer, seed))

    def forward() -> tf.Tensor:
        return fn(x)

    return Workload(variant, "layer", layer.as_dict(), variant_dtype(variant, gpu), layer.timesteps, forward,
                    [("forward", forward)], phase, step_marker)


def _build_lm(variant: str, config: LMConfig, seed: int) -> Workload:
    import keras

    model = lm_model.make_model(config, seed)
    tokens, targets = (tf.constant(a) for a in lm_model.make_batch(config, seed))
    call: Callable[[tf.Tensor], tf.Tensor] = model if variant == "lm_forward_eager" else tf.function(model)

    def forward() -> tf.Tensor:
        return call(tokens)

    if variant != "lm_train":
        return Workload(variant, "lm", config.as_dict(), "fp32", config.timesteps, forward, [("forward", forward)],
                        phase, step_marker)

    optimizer = keras.optimizers.SGD(learning_rate=0.1)
    loss_fn = tf.function(lambda t, logits: tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=t, logits=logits)))
    train_call = tf.function(lambda t: model(t, training=True))
    state: dict[str, Any] = {}

    def train_forward() -> None:
        state["tape"] = tape = tf.GradientTape()
        with tape:
            state["logits"] = train_call(tokens)

    def loss() -> None:
        with state["tape"]:
            state["loss"] = loss_fn(targets, state.pop("logits"))

    def backward() -> None:
        state["grads"] = state.pop("tape").gradient(state.pop("loss"), model.trainable_variables)

    def step_optimizer() -> None:
        optimizer.apply_gradients(zip(state.pop("grads"), model.trainable_variables, strict=True))

    phases: list[tuple[str, Callable[[], object]]] = [
        ("forward", train_forward), ("loss", loss), ("backward", backward), ("optimizer", step_optimizer)]
    return Workload(variant, "lm", config.as_dict(), "fp32", config.timesteps, forward, phases, phase, step_marker)
