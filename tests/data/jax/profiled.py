"""What the make_*.py capture scripts here share: run a function under jax.profiler and store the
XSpace it writes beside them (run them in a venv with jax installed; tracekit does not depend on it)."""

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import jax

HERE = Path(__file__).parent


def write_xspace(name: str, run: Callable[[], object], python_tracer: bool = True) -> Path:
    """Profile ``run()`` with jax.profiler.trace and write ``tests/data/jax/<name>.xplane.pb``; without
    the Python tracer (on by default) when ``python_tracer`` is False."""
    out = HERE / f"{name}.xplane.pb"
    options = jax.profiler.ProfileOptions()
    if not python_tracer:
        options.python_tracer_level = 0
    with tempfile.TemporaryDirectory() as logdir:
        with jax.profiler.trace(logdir, profiler_options=options):
            run()
        (written,) = Path(logdir).glob("plugins/profile/*/*.xplane.pb")
        shutil.copy(written, out)
    return out
