"""Run PyTorch LSTM variants over a sweep: unprofiled timing, then torch.profiler or Nsight Systems.

Per run: build the workload (fixed seed), warm up (compiles happen here and are timed apart),
time N steps with no profiler attached, then

- ``torch``: a separate run under torch.profiler (schedule: 1 warm-up step, K active steps,
  ``record_shapes``; CUDA activities on GPU), the trace stamped with the run's identity and
  ``timesteps`` so reports can count ops per timestep, written as ``.pt.trace.json.gz``;
- ``nsys``: the same workload in a child process under ``nsys profile`` (NVTX phase ranges,
  OS runtime; CUDA/cuDNN/cuBLAS on GPU), exported to SQLite;
- ``none``: timing only.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from tracekit.collectors import nsys, phases
from tracekit.collectors.pytorch.variants import LAYER_VARIANTS, LayerVariant, cpu_autocast_problem
from tracekit.collectors.pytorch.workloads import VARIANTS, build, variant_dtype
from tracekit.collectors.runner import RunSpec, check_choices, cpu_model_name
from tracekit.collectors.sweep import Preset
from tracekit.collectors.timing import MIN_TIMED_S, summarize, time_steps
from tracekit.collectors.workload import Workload

PROFILERS = ("torch", "nsys", "none")


def default_variants(device: str) -> list[str]:
    """Every variant that can run on ``device``."""
    return [name for name in VARIANTS if not (device == "cpu" and name in LAYER_VARIANTS and LAYER_VARIANTS[name].needs_gpu)]


def specs(variants: Sequence[str], preset: Preset, device: str, profilers: Sequence[str], seed: int = 0,
          threads: int = 1) -> list[RunSpec]:
    """One spec per variant x config of the preset x profiler."""
    check_choices("torch", variants, VARIANTS, profilers, PROFILERS)
    out = []
    for variant in variants:
        layer = LAYER_VARIANTS.get(variant)
        skip = _skip_reason(layer, device)
        if layer is not None:
            configs = [c.as_dict() for c in preset.layer_configs(layers=layer.layers)]
            repeats = preset.repeats
        else:
            configs, repeats = [preset.lm.as_dict()], preset.lm_repeats
        dtype = variant_dtype(variant, torch.device(device))
        for config in configs:
            for profiler in profilers:
                out.append(RunSpec("torch", variant, "layer" if layer else "lm", device, dtype, config, profiler,
                                   preset.name, preset.warmup, repeats, preset.profiled_steps, seed, threads, skip))
    return out


def _skip_reason(layer: LayerVariant | None, device: str) -> str | None:
    """Why a layer variant cannot run on ``device`` (recorded as skipped, not failed), or None."""
    if layer is None:
        return None
    if layer.needs_gpu and device != "cuda":
        return "needs a CUDA device (CUDA graphs)"
    if layer.autocast and device == "cpu":
        return cpu_autocast_problem()
    return None


def _setup(spec: RunSpec) -> torch.device:
    if spec.threads > 0:
        torch.set_num_threads(spec.threads)
    device = torch.device(spec.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("CUDA requested but torch.cuda.is_available() is False")
    return device


def _sync(device: torch.device) -> Any:
    return torch.cuda.synchronize if device.type == "cuda" else None


def _time(workload: Workload, device: torch.device, repeats: int, min_time_s: float = 0.0) -> dict[str, Any]:
    if device.type != "cuda":
        return time_steps(workload.step, repeats, min_time_s=min_time_s)
    # CUDA events measure device time between the step's first and last launch, host-side
    # launch latency included, without a host sync inside the interval.
    walls = time_steps(workload.step, repeats, sync=torch.cuda.synchronize, min_time_s=min_time_s)
    samples = []
    for _ in range(walls["wall_ns"]["n"]):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        workload.step()
        end.record()
        end.synchronize()
        samples.append(int(begin.elapsed_time(end) * 1e6))
    return {**walls, "cuda_event_ns": summarize(samples), "method": "cuda events + perf_counter"}


def _warm_up(workload: Workload, device: torch.device, steps: int) -> float:
    import time

    t0 = time.perf_counter()
    for _ in range(steps):
        workload.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model_name()


def execute(spec: RunSpec, out_dir: Path) -> dict[str, Any]:
    """Run one spec; returns the manifest row's fields (status ok) or raises."""
    device = _setup(spec)
    row: dict[str, Any] = {"framework_version": torch.__version__, "device_name": device_name(device),
                           "threads": torch.get_num_threads(), "nvtx": phases.backend(), "traces": []}
    if spec.profiler == "nsys":
        return {**row, **nsys.run_worker(spec, out_dir, "tracekit.collectors.pytorch.collect")}
    workload = build(spec.variant, spec.config, device, spec.seed)
    warmup_s = _warm_up(workload, device, spec.warmup)
    row["timing"] = {**_time(workload, device, spec.repeats, MIN_TIMED_S), "warmup_s": round(warmup_s, 4)}
    if spec.profiler == "torch":
        trace, profiled = _profile_torch(spec, workload, device, out_dir, row["timing"]["wall_ns"]["median"])
        row.update(profiler_version=f"torch.profiler (kineto) {torch.__version__}", traces=[trace],
                   profiled_timing=profiled)
    return row


def _profile_torch(spec: RunSpec, workload: Workload, device: torch.device, out_dir: Path,
                   unprofiled_step_ns: float | None = None) -> tuple[str, dict[str, Any]]:
    import time

    from torch.profiler import ProfilerActivity, profile, schedule

    rel = Path("traces") / "torch" / spec.variant / f"{spec.file_stem}.pt.trace.json.gz"
    final = out_dir / rel
    final.parent.mkdir(parents=True, exist_ok=True)
    # export_chrome_trace gzips when the name ends in .gz; write beside, then rename into place.
    tmp = final.with_name(f".{final.name[:-len('.json.gz')]}.tmp.json.gz")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sync = _sync(device)
    walls: list[int] = []
    try:
        # One schedule cycle: torch warns that events are cleared per cycle, which is what we want.
        warnings.filterwarnings("ignore", message=".*Profiler clears events", category=UserWarning)
        with profile(activities=activities, record_shapes=True,
                     schedule=schedule(wait=0, warmup=1, active=spec.profiled_steps),
                     on_trace_ready=lambda p: p.export_chrome_trace(str(tmp))) as prof:
            prof.add_metadata("timesteps", str(workload.timesteps))
            prof.add_metadata_json("tracekit_run", json.dumps(
                {"run_id": spec.run_id, "variant": spec.variant, "config": spec.config, "dtype": spec.dtype,
                 "device": spec.device, "preset": spec.preset,
                 # the same steps timed with no profiler attached: compare's headline uses it
                 "unprofiled_step_ns": unprofiled_step_ns}, sort_keys=True))
            for i in range(1 + spec.profiled_steps):
                t0 = time.perf_counter_ns()
                workload.step()
                if sync is not None:
                    sync()
                if i >= 1:
                    walls.append(time.perf_counter_ns() - t0)
                prof.step()
        if not tmp.exists():
            raise RuntimeError("torch.profiler wrote no trace")
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return rel.as_posix(), {"wall_ns": summarize(walls)}


def _nsys_timing(spec: RunSpec) -> dict[str, Any]:
    """In the child under nsys: warm up, then the profiled steps in their NVTX ranges."""
    device = _setup(spec)
    workload = build(spec.variant, spec.config, device, spec.seed)
    _warm_up(workload, device, spec.warmup)
    return _time(workload, device, spec.profiled_steps)


if __name__ == "__main__":
    raise SystemExit(nsys.serve_worker("tracekit.collectors.pytorch.collect", _nsys_timing))
