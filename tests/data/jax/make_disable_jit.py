"""Writes tests/data/jax/disable_jit.xplane.pb: a real jax.profiler capture on CPU of a jitted update run
under jax.disable_jit(), 4 steps marked with StepTraceAnnotation, without the Python tracer (its frames
would be most of the file). PjitFunction(update) is still recorded, and inside it each primitive is
dispatched as a computation of its own (PjitFunction(mul), PjitFunction(tanh), ...). Timed here
unprofiled: 9.4 ms a step under disable_jit, 46 µs jitted.

Run in a separate venv with jax installed (tracekit does not depend on jax):
    python -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax
    /tmp/jaxvenv/bin/python tests/data/jax/make_disable_jit.py
Made with jax/jaxlib 0.10.2.
"""

import jax
import jax.numpy as jnp
import numpy as np
from profiled import write_xspace


@jax.jit
def update(w, x, y):
    return w - 0.01 * jax.grad(lambda w: jnp.mean((jnp.tanh(x @ w) - y) ** 2))(w)


def loop(w: jax.Array, x: jax.Array, y: jax.Array) -> None:
    with jax.disable_jit():
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                w = update(w, x, y)
            w.block_until_ready()


rng = np.random.default_rng(0)
x, y = jnp.asarray(rng.random((256, 64), dtype=np.float32)), jnp.asarray(rng.random((256, 8), dtype=np.float32))
w0 = update(jnp.zeros((64, 8)), x, y).block_until_ready()
with jax.disable_jit():
    update(w0, x, y).block_until_ready()  # the primitives' computations compiled outside the capture
write_xspace("disable_jit", lambda: loop(w0, x, y), python_tracer=False)
