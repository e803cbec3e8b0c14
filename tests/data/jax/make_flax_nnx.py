"""Writes tests/data/jax/flax_nnx_{jit,eager}.xplane.pb: real jax.profiler captures on CPU of a Flax NNX
model's training step (embedding 200x32, a layer norm and an MLP block, SGD; 4 sequences of
16 tokens), steps marked with StepTraceAnnotation:
* flax_nnx_jit: the step under nnx.jit, whose every call walks the model's object graph in Python
  (flax/nnx/graphlib.py's _graph_flatten) before the one jitted computation; the Python tracer on
  (jax.profiler's default) to name it; 3 steps;
* flax_nnx_eager: the same step not jitted: JAX dispatches each primitive as a computation of its
  own, with its own Python (tracing under value_and_grad) between them; without the Python tracer
  (its frames were 12.9 MB of the file); 2 steps.

Run in a separate venv with jax, flax and optax installed (tracekit depends on none of them):
    python -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax flax optax
    /tmp/jaxvenv/bin/python tests/data/jax/make_flax_nnx.py
Made with jax/jaxlib 0.10.2, flax 0.12.8, optax 0.2.8.
"""

import jax
import optax
from flax import nnx
from profiled import write_xspace


class Block(nnx.Module):
    def __init__(self, d: int, rngs: nnx.Rngs) -> None:
        self.emb = nnx.Embed(200, d, rngs=rngs)
        self.ln = nnx.LayerNorm(d, rngs=rngs)
        self.fc1, self.fc2 = nnx.Linear(d, 4 * d, rngs=rngs), nnx.Linear(4 * d, d, rngs=rngs)
        self.head = nnx.Linear(d, 200, rngs=rngs)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        h = self.emb(tokens)
        return self.head(h + self.fc2(nnx.gelu(self.fc1(self.ln(h)))))


def loss_fn(model: Block, tokens: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(model(tokens)[:, :-1], tokens[:, 1:]).mean()


def train_step(model: Block, optimizer: nnx.Optimizer, tokens: jax.Array) -> jax.Array:
    loss, grads = nnx.value_and_grad(loss_fn)(model, tokens)
    optimizer.update(model, grads)
    return loss


tokens = jax.random.randint(jax.random.key(0), (4, 16), 0, 200)
for name, step in (("flax_nnx_jit", nnx.jit(train_step)), ("flax_nnx_eager", train_step)):
    model = Block(32, nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.sgd(0.01), wrt=nnx.Param)
    for _ in range(2):  # compiled (or each primitive's computation compiled) outside the capture
        step(model, optimizer, tokens).block_until_ready()

    def loop(step=step, model=model, optimizer=optimizer, steps=3 if name == "flax_nnx_jit" else 2) -> None:
        for i in range(steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                step(model, optimizer, tokens).block_until_ready()

    write_xspace(name, loop, python_tracer=name == "flax_nnx_jit")
