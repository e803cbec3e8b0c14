"""Writes tests/data/jax/split_step.xplane.pb: a real jax.profiler capture on CPU (the Python tracer off)
of a Flax Linen CNN's training step (two 3x3 convolutions of 16 and 32 channels, a Dense head; batches
of 32 images 32x32x3) whose gradient is one jitted function and whose optax.adamw update runs outside
jax.jit, each primitive dispatched as a computation of its own (PjitFunction(add), multiply,
integer_pow, sqrt...): 104 dispatches a step, 4 steps marked with StepTraceAnnotation. The report said
"CPU compute-bound" with 27% of the step in dispatch and no remedy for it; unprofiled, the step took
8.3-8.5 ms, 5.1-5.3 ms with the gradient and the update in one jax.jit.

Run in a separate venv with jax, flax and optax installed (tracekit depends on none of them):
    python -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax flax optax
    /tmp/jaxvenv/bin/python tests/data/jax/make_split_step.py
Made with jax/jaxlib 0.10.2, flax 0.12.8, optax 0.2.8.
"""

import jax
import jax.numpy as jnp
import optax
from flax import linen as nn
from profiled import write_xspace


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.avg_pool(nn.relu(nn.Conv(16, (3, 3))(x)), (2, 2), (2, 2))
        x = nn.relu(nn.Conv(32, (3, 3))(x))
        return nn.Dense(10)(x.reshape((x.shape[0], -1)))


def main() -> None:
    model = CNN()
    images, labels = jnp.ones((32, 32, 32, 3)), jnp.zeros((32,), jnp.int32)
    state = {"params": model.init(jax.random.PRNGKey(0), images)}
    optimizer = optax.adamw(1e-3)
    state["opt"] = optimizer.init(state["params"])

    def loss(params: dict, x: jax.Array, y: jax.Array) -> jax.Array:
        return optax.softmax_cross_entropy_with_integer_labels(model.apply(params, x), y).mean()

    gradient = jax.jit(jax.value_and_grad(loss))

    def step() -> None:
        _, grads = gradient(state["params"], images, labels)
        updates, state["opt"] = optimizer.update(grads, state["opt"], state["params"])  # op by op
        state["params"] = optax.apply_updates(state["params"], updates)
        jax.block_until_ready(state["params"])

    def loop() -> None:
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                step()

    for _ in range(3):
        step()
    write_xspace("split_step", loop, python_tracer=False)


if __name__ == "__main__":
    main()
