"""Writes tests/data/jax/python_in_step.xplane.pb: a real jax.profiler capture on CPU of a training loop
whose input features are computed in Python inside each marked step (StepTraceAnnotation), from nested
lists (a per-row loop of Python arithmetic), before a small jitted update: 4 steps. The Python tracer (on
by default) records the feature function; the update is a few percent of the step.

Run in a separate venv with jax installed (tracekit does not depend on jax):
    python -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax
    /tmp/jaxvenv/bin/python tests/data/jax/make_python_in_step.py
Made with jax/jaxlib 0.10.2.
"""

import jax
import jax.numpy as jnp
import numpy as np
from profiled import write_xspace


@jax.jit
def update(w, x, y):
    grad = jax.grad(lambda w: jnp.mean((jnp.tanh(x @ w) - y) ** 2))(w)
    return w - 0.01 * grad


rng = np.random.default_rng(0)
ROWS = [[float(v) for v in row] for row in rng.random((128, 64))]
Y = rng.random((128, 8), dtype=np.float32)


def features(rows: list[list[float]]) -> np.ndarray:
    out = []
    for r in rows:
        mean = sum(r) / len(r)
        # a polynomial of each centred value, term by term: Python arithmetic, no calls
        out.append([d * (1.0 + d * (0.5 + d * (1 / 6 + d * (1 / 24 + d / 120)))) for d in [v - mean for v in r]])
    return np.array(out, dtype=np.float32)


def loop(w: jax.Array) -> None:
    for i in range(4):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            w = update(w, features(ROWS), Y)
            w.block_until_ready()


w0 = update(jnp.zeros((64, 8)), features(ROWS), Y).block_until_ready()  # compiled outside the capture
write_xspace("python_in_step", lambda: loop(w0))
