"""Writes two real JAX profiles (jax.profiler, CPU) of a training loop that marks no step (no
``StepTraceAnnotation``), each iteration a jitted SGD step on a small MLP:

* ``unnumbered_annotation.xplane.pb``: each iteration in ``TraceAnnotation("train_step")``, whose
  step blocks until the new parameters are ready;
* ``jit_loop.xplane.pb``: no range of the program's own, only the jitted calls. Whether XLA's CPU
  thread runs a step's ops before ``PjitFunction(train_step)`` returns varies from run to run: in
  this capture it did. ``jit_loop_async.xplane.pb`` is an earlier capture by this script in which
  the ops ran after each call returned, while the loop blocked on the result;
* ``unnumbered_annotation.perfetto_trace.json.gz``: the first capture as the trace-viewer JSON that
  ``create_perfetto_trace=True`` writes beside it.

Neither has step rows as read; tracekit takes the annotation's calls as steps, and the jitted
calls (``PjitFunction(train_step)``) where the evidence allows (tracekit.ingest.step_inference),
never the runtime's own ranges (PjRt execution, buffer waits).

Run in a separate venv with jax installed (tracekit does not depend on jax):
    python -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax
    /tmp/jaxvenv/bin/python tests/data/jax/make_unnumbered_loop.py
Made with jax/jaxlib 0.10.2 on this project's 2-core machine.
"""

import glob
import shutil
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp

key = jax.random.PRNGKey(0)
params = {"w1": jax.random.normal(key, (64, 128)) * 0.1, "w2": jax.random.normal(key, (128, 10)) * 0.1}
x, y = jax.random.normal(key, (32, 64)), jax.random.normal(key, (32, 10))


def loss(p, x, y):
    return jnp.mean((jnp.tanh(x @ p["w1"]) @ p["w2"] - y) ** 2)


@jax.jit
def train_step(p, x, y):
    grads = jax.grad(loss)(p, x, y)
    return jax.tree_util.tree_map(lambda a, g: a - 0.01 * g, p, grads)


params = jax.block_until_ready(train_step(params, x, y))  # compiled before the capture
for out, annotated in (("unnumbered_annotation.xplane.pb", True), ("jit_loop.xplane.pb", False)):
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp, create_perfetto_trace=annotated):
            for _ in range(8):
                if annotated:
                    with jax.profiler.TraceAnnotation("train_step"):
                        params = jax.block_until_ready(train_step(params, x, y))
                else:
                    params = jax.block_until_ready(train_step(params, x, y))
        (written,) = glob.glob(f"{tmp}/plugins/profile/*/*.xplane.pb")
        shutil.copy(written, Path(__file__).with_name(out))
        if annotated:
            (viewer,) = glob.glob(f"{tmp}/plugins/profile/*/perfetto_trace.json.gz")
            shutil.copy(viewer, Path(__file__).with_name("unnumbered_annotation.perfetto_trace.json.gz"))
