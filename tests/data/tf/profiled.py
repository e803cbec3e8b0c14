"""What the make_*.py capture scripts here share: run a function under the TF profiler and store the
XSpace it writes beside them."""

import shutil
import tempfile
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
