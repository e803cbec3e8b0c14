"""Writes tests/data/jax/scan_rnn.xplane.pb: a real JAX profile (jax.profiler) of a jitted tanh-RNN
gradient over 8 timesteps with lax.scan, 2 steps, on CPU.

Run in a separate venv with jax installed (tracekit does not depend on jax):
    python -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax
    /tmp/jaxvenv/bin/python tests/data/jax/make_trace.py
Made with jax/jaxlib 0.10.2.
"""

import shutil
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp

key = jax.random.PRNGKey(0)
W, U = jax.random.normal(key, (16, 32)), jax.random.normal(key, (32, 32))
xs = jax.random.normal(key, (8, 4, 16))


def cell(h, x):
    h = jnp.tanh(x @ W + h @ U)
    return h, h


@jax.jit
def loss(xs):
    h, _ = jax.lax.scan(cell, jnp.zeros((4, 32)), xs)
    return h.sum()


grad = jax.jit(jax.grad(loss))
grad(xs).block_until_ready()  # compile outside the profile
with tempfile.TemporaryDirectory() as logdir:
    with jax.profiler.trace(logdir):
        for i in range(2):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                grad(xs).block_until_ready()
    (written,) = Path(logdir).glob("plugins/profile/*/*.xplane.pb")
    shutil.copy(written, Path(__file__).with_name("scan_rnn.xplane.pb"))
