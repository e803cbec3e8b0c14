"""The whole study as one resumable sweep: PyTorch and TensorFlow variants, the native baseline,
Nsight Systems where present; then every trace ingested into one Parquet dataset.

``tracekit run`` drives this and then analyzes and reports (``tracekit.analyze.published`` and
``tracekit.render.study_document``). Specs of all collectors go through one ``run_sweep``, so there
is one progress bar and one manifest, and a second run reuses every finished config.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tracekit.collectors.runner import RunSpec, SweepResult, run_sweep
from tracekit.collectors.sweep import Preset

# Runs under Nsight Systems when it is present: a few, because each costs ~10 s of nsys start-up.
NSYS_VARIANTS = {"torch": ("nn_lstm", "lm_train")}


@dataclass
class StudyPlan:
    specs: list[RunSpec]
    executors: dict[str, Callable[[RunSpec, Path], dict[str, Any]]]
    notes: list[str] = field(default_factory=list)

    def execute(self, spec: RunSpec, out_dir: Path) -> dict[str, Any]:
        return self.executors[spec.framework](spec, out_dir)


def plan(preset: Preset, device: str, threads: int = 1, seed: int = 0, with_nsys: bool | None = None,
         frameworks: tuple[str, ...] = ("torch", "tf", "native")) -> StudyPlan:
    """Every spec of the study on ``device``; frameworks that cannot be imported are noted and left out."""
    specs: list[RunSpec] = []
    executors: dict[str, Callable[[RunSpec, Path], dict[str, Any]]] = {}
    notes: list[str] = []
    nsys_ok = _nsys_available() if with_nsys is None else with_nsys
    if not nsys_ok:
        notes.append("Nsight Systems not found: no nsys traces (collectors/get_nsys.sh provides it on Debian/Ubuntu).")
    if "torch" in frameworks:
        try:
            from tracekit.collectors.pytorch import cli_backend as torch_backend
        except ImportError as e:
            notes.append(f"PyTorch collectors skipped: {e}.")
        else:
            specs += torch_backend.specs(torch_backend.default_variants(device), preset, device, ["torch"], seed, threads)
            if nsys_ok:
                specs += torch_backend.specs(list(NSYS_VARIANTS["torch"]), preset, device, ["nsys"], seed, threads)
            executors["torch"] = torch_backend.execute
    if "tf" in frameworks:
        try:
            from tracekit.collectors.tflow import cli_backend as tf_backend
            from tracekit.collectors.tflow.variants import LAYER_VARIANTS
        except ImportError as e:
            notes.append(f"TensorFlow collectors skipped: {e}.")
        else:
            # Level 2 (start/stop) for the timeline; level 3 for exact op counts, when xprof is installed.
            profilers = ["tf", "tf-host3"] if importlib.util.find_spec("xprof") else ["tf"]
            if len(profilers) == 1:
                notes.append("xprof not installed: TF traces are host-tracer level 2 only, which omits the ops TF "
                             "deems cheap (pip install 'tracekit[tf-trace]').")
            variants = tf_backend.default_variants(device)
            layers = [v for v in variants if v in LAYER_VARIANTS]
            specs += tf_backend.specs(layers, preset, device, profilers, seed, threads)
            # The language models only need their step times (the published LM finding) and one trace:
            # level 3 would trace 3.5 s training steps op by op for nothing (~2 minutes of a quick run).
            specs += tf_backend.specs([v for v in variants if v not in LAYER_VARIANTS], preset, device, ["tf"], seed,
                                      threads)
            executors["tf"] = tf_backend.execute
    if "native" in frameworks:
        from tracekit.collectors import native

        try:
            built = native.build(cuda=device == "cuda")
        except native.BaselineError as e:
            notes.append(f"Native baseline skipped: {e.one_line()}")
        else:
            specs += native.specs(native.default_variants(device), preset, device, ["none"], seed, threads)
            executors["native"] = native.executor(built)
    return StudyPlan(specs, executors, notes)


def _nsys_available() -> bool:
    from tracekit.collectors import nsys

    try:
        exe = nsys.find_nsys()
    except nsys.NsysError:
        return False
    return nsys.find_importer(exe) is not None


def collect(study: StudyPlan, out_dir: Path, progress: bool | None = None, terminal: TextIO | None = None) -> SweepResult:
    """Run the plan; progress (a bar, or one line per run when ``progress`` is False) goes to ``terminal``."""
    stream = terminal or sys.stderr
    return run_sweep(study.specs, out_dir, study.execute, progress=progress,
                     log=None if progress else (lambda line: print(line, file=stream)), terminal=stream)
