"""Writes tests/data/jax/hlo_modules.xplane.pb: a real jax.profiler capture on CPU of two jitted
functions whose XLA instructions share names but not what they compute: ``project`` multiplies two
matrices, ``total`` sums one; XLA:CPU runs both as ``ynn_fusion`` (a YNNPACK fusion of a ``dot`` in
one module, of a ``reduce`` in the other). 4 steps, each calling both. The HLO modules are on the
``/host:metadata`` plane.

Run in a separate venv with jax installed (tracekit does not depend on jax):
    python -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax
    /tmp/jaxvenv/bin/python tests/data/jax/make_hlo_modules.py
Made with jax/jaxlib 0.10.2.
"""

import shutil
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

W = jnp.asarray(np.linspace(-1, 1, 256 * 256, dtype=np.float32).reshape(256, 256))
x = jnp.asarray(np.ones((64, 256), np.float32))


@jax.jit
def project(x):
    return x @ W


@jax.jit
def total(x):
    return x.sum()


project(x).block_until_ready(), total(x).block_until_ready()  # compile outside the profile
with tempfile.TemporaryDirectory() as logdir:
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                total(project(x)).block_until_ready()
    (written,) = Path(logdir).glob("plugins/profile/*/*.xplane.pb")
    shutil.copy(written, Path(__file__).with_name("hlo_modules.xplane.pb"))
