"""Writes tests/data/jax/float64_mlp.xplane.pb and float32_mlp.xplane.pb: real jax.profiler captures on CPU
(the Python tracer off) of a jitted MLP training step (256-512-512-10, batch 64, optax.adam) with
``jax_enable_x64`` on, 4 steps marked with StepTraceAnnotation: in float64 (NumPy inputs, float64 by
default, and float64 parameters: every product's HLO result is f64), and the same step with the inputs and
parameters cast to float32 (tracekit.analyze.float64's XLA rule). Prints each step unprofiled.

Run in a separate venv with jax and optax installed (tracekit depends on neither):
    python -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax optax
    /tmp/jaxvenv/bin/python tests/data/jax/make_float64.py
Made with jax/jaxlib 0.10.2, optax 0.2.8 on a 2-core AMD EPYC.
"""

import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from profiled import write_xspace  # noqa: E402

SIZES = (256, 512, 512, 10)


def mlp(params: list, x: jax.Array) -> jax.Array:
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def training_step(dtype: type) -> tuple:
    rng = np.random.default_rng(0)
    params = [(jnp.asarray(rng.standard_normal((a, b)) * 0.05, dtype), jnp.zeros(b, dtype))
              for a, b in zip(SIZES[:-1], SIZES[1:], strict=True)]
    x, y = jnp.asarray(rng.standard_normal((64, SIZES[0])), dtype), jnp.arange(64) % 10
    optimizer = optax.adam(1e-3)

    @jax.jit
    def step(params: list, opt_state: tuple) -> tuple:
        def loss(p: list) -> jax.Array:
            return optax.softmax_cross_entropy_with_integer_labels(mlp(p, x), y).mean()
        updates, opt_state = optimizer.update(jax.grad(loss)(params), opt_state, params)
        return optax.apply_updates(params, updates), opt_state
    return step, (params, optimizer.init(params))


def main() -> None:
    for name, dtype in (("float64_mlp", jnp.float64), ("float32_mlp", jnp.float32)):
        step, state = training_step(dtype)
        for _ in range(5):
            state = jax.block_until_ready(step(*state))
        start = time.perf_counter()
        for _ in range(50):
            state = jax.block_until_ready(step(*state))
        print(f"{name}: {(time.perf_counter() - start) / 50 * 1e3:.2f} ms a step")

        def run(state: tuple = state, step=step) -> None:
            for i in range(4):
                with jax.profiler.StepTraceAnnotation("train", step_num=i):
                    state = jax.block_until_ready(step(*state))
        write_xspace(name, run, python_tracer=False)


if __name__ == "__main__":
    main()
