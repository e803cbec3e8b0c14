"""Writes tests/data/jax/tanh_steps/: one real jax.profiler capture with create_perfetto_trace=True,
as JAX leaves it in plugins/profile/<run>/: vm.xplane.pb, vm.trace.json.gz (xprof's trace-viewer
JSON) and perfetto_trace.json.gz (the same JSON, rewritten for Perfetto). A jitted tanh(x @ W),
3 steps, on CPU.

Run in a separate venv with jax installed (tracekit does not depend on jax):
    python -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax
    /tmp/jaxvenv/bin/python tests/data/jax/make_tanh_steps.py
Made with jax/jaxlib 0.10.2 (the host file is named after the machine, "vm" here).
"""

import shutil
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp

W = jax.random.normal(jax.random.PRNGKey(0), (64, 64))


@jax.jit
def f(x):
    return jnp.tanh(x @ W).sum()


x = jnp.ones((32, 64))
f(x).block_until_ready()  # compile outside the profile
out = Path(__file__).with_name("tanh_steps")
with tempfile.TemporaryDirectory() as logdir:
    with jax.profiler.trace(logdir, create_perfetto_trace=True):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                f(x).block_until_ready()
    (run,) = Path(logdir).glob("plugins/profile/*")
    out.mkdir(exist_ok=True)
    for written in run.iterdir():
        shutil.copy(written, out / written.name)
