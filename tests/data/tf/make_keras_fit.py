"""Writes tests/data/tf/keras_fit.xplane.pb: one real TF profiler capture of Keras's model.fit on
the CPU (a Dense classifier, 16 batches of a tf.data pipeline; tests/test_verdicts.py captures the
same model live). Kept because the wait it shows depends on the OS scheduler: several step-function
calls end milliseconds after TF's executor is done, with nothing traced on any thread, and a live
capture shows that only some of the time (2 of 3 on this project's 2-core machine).

    python tests/data/tf/make_keras_fit.py
Made with TF 2.21 and Keras 3 (the host file is named after the machine, "vm" here).
"""

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from test_verdicts import _keras_fit_capture  # noqa: E402

with tempfile.TemporaryDirectory() as tmp:
    (written,) = _keras_fit_capture(Path(tmp)).glob("plugins/profile/*/*.xplane.pb")
    shutil.copy(written, Path(__file__).with_name("keras_fit.xplane.pb"))
