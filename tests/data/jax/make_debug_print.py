"""Writes tests/data/jax/debug_print.xplane.pb: a real jax.profiler capture on CPU of a jitted update whose
loss is printed with jax.debug.print inside the jitted function (a host callback, HLO debug_print.1,
each step), 8 steps marked with StepTraceAnnotation. Timed here unprofiled: 392 µs a step with the
print, 48 µs without.

Run in a separate venv with jax installed (tracekit does not depend on jax):
    python -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax
    /tmp/jaxvenv/bin/python tests/data/jax/make_debug_print.py
Made with jax/jaxlib 0.10.2.
"""

import contextlib
import io

import jax
import jax.numpy as jnp
import numpy as np
from profiled import write_xspace


@jax.jit
def update(w, x, y):
    def loss(w):
        error = jnp.mean((jnp.tanh(x @ w) - y) ** 2)
        jax.debug.print("loss {l}", l=error)
        return error

    return w - 0.01 * jax.grad(loss)(w)


def loop(w: jax.Array, x: jax.Array, y: jax.Array) -> None:
    for i in range(8):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            w = update(w, x, y)
    w.block_until_ready()


rng = np.random.default_rng(0)
x, y = jnp.asarray(rng.random((256, 64), dtype=np.float32)), jnp.asarray(rng.random((256, 8), dtype=np.float32))
with contextlib.redirect_stdout(io.StringIO()):  # the prints themselves
    w0 = update(jnp.zeros((64, 8)), x, y).block_until_ready()  # compiled outside the capture
    write_xspace("debug_print", lambda: loop(w0, x, y))
