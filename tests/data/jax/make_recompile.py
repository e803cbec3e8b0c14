"""Writes tests/data/jax/recompile.xplane.pb: a real jax.profiler capture on CPU of a jitted function
called with a new input shape in each of its steps but the first (whose shape was compiled before the
profile), 4 steps marked with StepTraceAnnotation: each later step lowers and compiles the function
again (``lower_sharding_computation``, ``backend_compile_and_load``), most of its time.

Run in a separate venv with jax installed (tracekit does not depend on jax):
    python -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax
    /tmp/jaxvenv/bin/python tests/data/jax/make_recompile.py
Made with jax/jaxlib 0.10.2.
"""

import shutil
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def score(x):
    return jnp.tanh(x @ x.T).sum()


batches = [jnp.asarray(np.ones((8 + i, 16), np.float32)) for i in range(4)]  # made before: no op in the steps
score(batches[0]).block_until_ready()  # the first step's shape, compiled outside the profile
with tempfile.TemporaryDirectory() as logdir:
    with jax.profiler.trace(logdir):
        for i, x in enumerate(batches):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                score(x).block_until_ready()
    (written,) = Path(logdir).glob("plugins/profile/*/*.xplane.pb")
    shutil.copy(written, Path(__file__).with_name("recompile.xplane.pb"))
