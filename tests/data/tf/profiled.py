"""What the make_*.py capture scripts here share: run a function under the TF profiler and store the
XSpace it writes beside them."""

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import tensorflow as tf

HERE = Path(__file__).parent


def write_xspace(name: str, run: Callable[[], object]) -> Path:
    """Profile ``run()`` with tf.profiler and write ``tests/data/tf/<name>.xplane.pb``."""
    out = HERE / f"{name}.xplane.pb"
    with tempfile.TemporaryDirectory() as tmp:
        tf.profiler.experimental.start(tmp)
        run()
        tf.profiler.experimental.stop()
        (written,) = Path(tmp).glob("plugins/profile/*/*.xplane.pb")
        shutil.copy(written, out)
    return out


def write_steps(name: str, step: Callable[[], object], steps: int = 3) -> Path:
    """``write_xspace`` of ``steps`` calls of ``step()``, each marked a step (a ``Trace`` with ``step_num``)."""
    def run() -> None:
        for i in range(steps):
            with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
                step()
    return write_xspace(name, run)


def unprofiled_ms(step: Callable[[], object], calls: int = 20, warmup: int = 3) -> float:
    """``step()``'s mean time a call in ms, without the profiler, after ``warmup`` calls."""
    for _ in range(warmup):
        step()
    start = time.perf_counter()
    for _ in range(calls):
        step()
    return (time.perf_counter() - start) / calls * 1e3
