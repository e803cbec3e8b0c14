"""The LSTM study as a library call: collect every variant, ingest the traces, analyze, report.

``run_study`` is what ``tracekit run`` does; ``analyze_study`` re-analyzes a study directory that
is already collected. Both return a ``Study``, which ``tracekit.render.study_document`` renders.
The collectors (which import the frameworks) are imported only inside ``run_study``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tracekit.analyze.breakdown import Breakdown
from tracekit.analyze.launch import LaunchReport
from tracekit.analyze.overhead import OverheadReport
from tracekit.analyze.published import Finding
from tracekit.analyze.study_table import StudyFacts
from tracekit.errors import UsageError

FRAMEWORKS = ("torch", "tf", "native")


@dataclass
class Study:
    """A collected and analyzed study directory."""

    facts: StudyFacts
    rows: list[dict[str, Any]]  # the manifest's latest row per run
    breakdowns: dict[str, Breakdown]  # by run id, for every traced run
    launches: dict[str, LaunchReport]  # by run id, for every traced run (GPU and CPU verdicts)
    findings: list[Finding]  # the published findings beside this machine's measurements
    overhead: OverheadReport  # framework overhead against the native baseline
    failed: bool = False  # a run failed (skipped runs are not failures)


def run_study(directory: str | Path, preset: str = "quick", device: str = "auto",
              frameworks: tuple[str, ...] = FRAMEWORKS, threads: int = 1, seed: int = 0, nsys: bool | None = None,
              progress: bool | None = None, terminal: TextIO | None = None) -> Study:
    """Collect (resuming finished configs), ingest and analyze the study in ``directory``.

    Args:
        preset: tiny, quick or paper (``collectors.sweep``).
        device: cpu, cuda or auto.
        frameworks: a subset of torch, tf, native.
        nsys: run the Nsight Systems configs (None: when nsys is installed).
        progress: a progress bar (None: when ``terminal`` is a terminal).
        terminal: where progress and notes go (None: stderr).
    """
    from tracekit.collectors import study
    from tracekit.collectors.sweep import preset as lookup_preset

    started = time.perf_counter()
    chosen = lookup_preset(preset)
    unknown = set(frameworks) - set(FRAMEWORKS)
    if unknown:
        raise UsageError(f"unknown framework(s) {', '.join(sorted(unknown))}; choose from {', '.join(FRAMEWORKS)}")
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    device = device if device != "auto" else detect_device()
    plan = study.plan(chosen, device, threads=threads, seed=seed, with_nsys=nsys, frameworks=frameworks)
    if not plan.specs:
        raise UsageError("nothing to run: " + " ".join(plan.notes))
    for note in plan.notes:
        print(f"note: {note}", file=terminal)
    result = study.collect(plan, out, progress=progress, terminal=terminal)
    analyzed = analyze_study(out, chosen.name, device, plan.notes, time.perf_counter() - started, len(result.reused))
    analyzed.failed = bool(result.failed)
    return analyzed


def analyze_study(directory: str | Path, preset_name: str, device: str, notes: list[str] | None = None,
                  wall_s: float = 0.0, reused: int = 0) -> Study:
    """Ingest every run's first trace into DIRECTORY/dataset/ (run = framework) and analyze the study
    collected with preset ``preset_name`` on ``device``."""
    from tracekit import dataset
    from tracekit.analyze.breakdown import breakdown
    from tracekit.analyze.launch import launch
    from tracekit.analyze.overhead import TRACED_PROFILERS, decomposable, overhead
    from tracekit.analyze.published import findings
    from tracekit.collectors.sweep import LMConfig
    from tracekit.collectors.sweep import preset as lookup_preset
    from tracekit.ingest import parquet
    from tracekit.manifest import read_manifest

    out = Path(directory)
    m = read_manifest(out)
    latest = m.latest()
    rows = list(latest.values())
    # Every run's first trace (an nsys run's SQLite, not its .nsys-rep).
    first_trace = {str(m.trace_paths(r)[0]): rid for rid, r in latest.items() if r["status"] == "ok" and r.get("traces")}
    ingested: dict[str, dataset.Entry] = {}
    errors: list[str] = []
    for framework in sorted({latest[rid]["framework"] for rid in first_trace.values()}):
        paths = [p for p, rid in first_trace.items() if latest[rid]["framework"] == framework]
        result = dataset.ingest(paths, out / "dataset", run=framework)
        ingested.update(result.by_file)
        errors += result.errors
    tables = {first_trace[path]: parquet.read(out / "dataset" / entry.partition) for path, entry in ingested.items()
              if latest[first_trace[path]]["profiler"] in TRACED_PROFILERS}
    breakdowns = {rid: breakdown(t) for rid, t in tables.items()}
    launches = {rid: launch(t, bd=breakdowns[rid]) for rid, t in tables.items()}
    layer_tables = {rid: t for rid, t in tables.items() if decomposable(latest[rid])}
    names = [r.get("device_name") for r in rows if r.get("device") == device and r.get("device_name")]
    facts = StudyFacts(str(out), preset_name, device, str(names[0]) if names else device, wall_s,
                       sum(1 for r in rows if r["status"] == "ok"),
                       [{"run_id": r["run_id"], "status": r["status"], "reason": str(r.get("error") or "")}
                        for r in sorted(rows, key=lambda r: r["run_id"]) if r["status"] != "ok"], reused,
                       list(notes or []) + [f"not ingested: {e}" for e in errors])
    # The language-model findings compare with the published ones only at the paper's model size.
    lm_is_paper_size = lookup_preset(preset_name).lm == LMConfig()
    return Study(facts, rows, breakdowns, launches, findings(rows, breakdowns, device, lm_is_paper_size),
                 overhead(rows, layer_tables))


def detect_device() -> str:
    """cuda when torch sees a GPU or nvidia-smi lists one, else cpu."""
    try:
        import torch

        if torch.cuda.is_available():
            return "cuda"
    except ImportError:
        pass
    return "cuda" if gpu_listed_by_nvidia_smi() else "cpu"


def gpu_listed_by_nvidia_smi() -> bool:
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    return smi is not None and subprocess.run([smi, "-L"], capture_output=True).returncode == 0
