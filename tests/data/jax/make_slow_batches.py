"""Writes tests/data/jax/slow_batches.xplane.pb: a real jax.profiler capture on CPU of a training loop
whose batches are made in Python between the steps (a 10 ms sleep standing for decoding and
augmentation), 4 steps marked with StepTraceAnnotation around the jitted update alone. JAX dispatches
the update asynchronously, so the steps are short and the loop is almost all the batch function,
which the Python tracer (on by default) records.

Run in a separate venv with jax installed (tracekit does not depend on jax):
    python -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax
    /tmp/jaxvenv/bin/python tests/data/jax/make_slow_batches.py
Made with jax/jaxlib 0.10.2.
"""

import shutil
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def update(w, x, y):
    grad = jax.grad(lambda w: jnp.mean((jnp.tanh(x @ w) - y) ** 2))(w)
    return w - 0.01 * grad


rng = np.random.default_rng(0)


def next_batch():
    time.sleep(0.01)  # decoding and augmentation in Python
    return rng.random((256, 64), dtype=np.float32), rng.random((256, 8), dtype=np.float32)


w = update(jnp.zeros((64, 8)), *next_batch()).block_until_ready()  # compiled outside the capture
with tempfile.TemporaryDirectory() as logdir:
    with jax.profiler.trace(logdir):
        for i in range(4):
            x, y = next_batch()
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                w = update(w, x, y)
        w.block_until_ready()
    (written,) = Path(logdir).glob("plugins/profile/*/*.xplane.pb")
    shutil.copy(written, Path(__file__).with_name("slow_batches.xplane.pb"))
