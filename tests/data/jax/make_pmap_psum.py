"""Writes tests/data/jax/pmap_psum.xplane.pb: a real JAX profile (jax.profiler) of a data-parallel
step on two CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=2): jax.pmap of a
gradient step whose gradients are averaged with jax.lax.pmean, 4 steps marked with
StepTraceAnnotation. XLA runs the all-reduce as a `psum.N` instruction on each device's thread,
the two meeting in a rendezvous.

Run in a separate venv with jax installed (tracekit does not depend on jax):
    python -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax
    /tmp/jaxvenv/bin/python tests/data/jax/make_pmap_psum.py
Made with jax/jaxlib 0.10.2.
"""

import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"

import glob  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

key = jax.random.PRNGKey(0)
W = jax.random.normal(key, (256, 256))


@partial(jax.pmap, axis_name="devices")
def step(w, x):
    grad = jax.grad(lambda w: jnp.tanh(x @ w).sum())(w)
    return w - 0.01 * jax.lax.pmean(grad, "devices")


weights, batches = jnp.stack([W, W]), jax.random.normal(key, (2, 64, 256))
weights = step(weights, batches).block_until_ready()  # compile outside the capture
with tempfile.TemporaryDirectory() as tmp:
    jax.profiler.start_trace(tmp)
    for i in range(4):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            weights = step(weights, batches).block_until_ready()
    jax.profiler.stop_trace()
    (written,) = glob.glob(f"{tmp}/**/*.xplane.pb", recursive=True)
    shutil.copy(written, Path(__file__).with_name("pmap_psum.xplane.pb"))
