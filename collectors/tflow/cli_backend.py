"""What ``tracekit collect tf`` needs from the TensorFlow collector, in one place."""

from __future__ import annotations

import os

# Quiet TF's C++ start-up banner (oneDNN notice, CPU features) before it is imported.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tracekit.collectors.tflow.collect import default_variants, detect_device, execute, specs  # noqa: E402
from tracekit.collectors.tflow.workloads import VARIANTS  # noqa: E402

__all__ = ["VARIANTS", "default_variants", "detect_device", "execute", "specs"]
