"""What ``tracekit collect torch`` needs from the PyTorch collector, in one place."""

from __future__ import annotations

import torch
from tracekit.collectors.pytorch.collect import default_variants, execute, specs
from tracekit.collectors.pytorch.workloads import VARIANTS

__all__ = ["VARIANTS", "default_variants", "detect_device", "execute", "specs"]


def detect_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"
