"""Run TensorFlow LSTM variants over a sweep: unprofiled timing, then the TF profiler or Nsight Systems.

Per run, as for PyTorch (``collectors.pytorch.collect``): build (fixed seeds), warm up (tracing
and XLA compiles timed apart), N unprofiled steps, then

- ``tf``: the profiled steps between ``tf.profiler.experimental.start``/``stop``, the XSpace
  moved to ``traces/tf/VARIANT/STEM.xplane.pb``. TF 2.21 ignores the ``ProfilerOptions`` given to
  ``start()`` (research/tf_profiler.md section 2.3), so the capture runs at the defaults, host
  tracer level 2 and no Python tracer; the manifest says so;
- ``tf-host3`` / ``tf-python``: the documented workaround for that bug: a profiler server in this
  process and xprof's client, in a thread, asking it for a capture at host tracer level 3 (and,
  for ``tf-python``, with the Python tracer) for a fixed duration; needs the ``xprof`` package
  (``pip install 'tracekit[tf-trace]'``); the profiled steps start once tracing is on. Level 3 matters for op counts: at level 2 the executor
  traces only ops its cost model deems expensive (~10 us and up, learned over the first runs), so
  a level-2 trace of a warmed-up LSTM drops most of the small per-timestep ops (keras_lstm at
  hidden 256, batch 16, 20 timesteps: ~55 ops per step at level 2, 1,007 at level 3);
- ``nsys``: the workload in a child process under ``nsys profile``;
- ``none``: timing only.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import tensorflow as tf
from tracekit.collectors import nsys, phases
from tracekit.collectors.runner import RunSpec, check_choices, cpu_model_name
from tracekit.collectors.sweep import Preset
from tracekit.collectors.tflow.variants import LAYER_VARIANTS
from tracekit.collectors.tflow.workloads import VARIANTS, build, variant_dtype
from tracekit.collectors.timing import MIN_TIMED_S, summarize, time_steps
from tracekit.collectors.workload import Workload

PROFILERS = ("tf", "tf-host3", "tf-python", "nsys", "none")
CAPTURE = {"method": "tf.profiler.experimental.start/stop", "host_tracer_level": 2, "python_tracer_level": 0,
           "device_tracer_level": 1,
           "note": "TF 2.21 ignores ProfilerOptions passed to start(); these are its defaults"}
REMOTE_OPTIONS = {"tf-host3": {"host_tracer_level": 3, "python_tracer_level": 0, "device_tracer_level": 1},
                  "tf-python": {"host_tracer_level": 3, "python_tracer_level": 1, "device_tracer_level": 1}}
_server_port: int | None = None


def default_variants(device: str) -> list[str]:
    return list(VARIANTS)


def specs(variants: Sequence[str], preset: Preset, device: str, profilers: Sequence[str], seed: int = 0,
          threads: int = 1) -> list[RunSpec]:
    check_choices("tf", variants, VARIANTS, profilers, PROFILERS)
    out = []
    for variant in variants:
        layer = variant in LAYER_VARIANTS
        configs = [c.as_dict() for c in preset.layer_configs()] if layer else [preset.lm.as_dict()]
        repeats = preset.repeats if layer else preset.lm_repeats
        for config in configs:
            for profiler in profilers:
                out.append(RunSpec("tf", variant, "layer" if layer else "lm", device,
                                   variant_dtype(variant, device == "cuda"), config, profiler, preset.name,
                                   preset.warmup, repeats, preset.profiled_steps, seed, threads))
    return out


def detect_device() -> str:
    return "cuda" if tf.config.list_physical_devices("GPU") else "cpu"


def _setup(spec: RunSpec) -> dict[str, int]:
    """Thread pools can only be sized before TF's runtime starts: first run of the process wins."""
    if spec.threads > 0:
        try:
            tf.config.threading.set_intra_op_parallelism_threads(spec.threads)
            tf.config.threading.set_inter_op_parallelism_threads(spec.threads)
        except RuntimeError:
            pass
    if spec.device == "cuda" and not tf.config.list_physical_devices("GPU"):
        raise RuntimeError("CUDA requested but TensorFlow sees no GPU")
    return {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads()}


def _sync(spec: RunSpec) -> Any:
    return tf.test.experimental.sync_devices if spec.device == "cuda" else None


def _warm_up(workload: Workload, spec: RunSpec) -> float:
    t0 = time.perf_counter()
    for _ in range(spec.warmup):
        workload.step()
    if spec.device == "cuda":
        tf.test.experimental.sync_devices()
    return time.perf_counter() - t0


def execute(spec: RunSpec, out_dir: Path) -> dict[str, Any]:
    pools = _setup(spec)
    gpu = spec.device == "cuda"
    row: dict[str, Any] = {"framework_version": tf.__version__, "threads": pools["intra_op"], "tf_threads": pools,
                           "device_name": tf.config.experimental.get_device_details(
                               tf.config.list_physical_devices("GPU")[0]).get("device_name", "GPU")
                           if gpu else cpu_model_name(), "nvtx": phases.backend(), "traces": []}
    if spec.profiler == "nsys":
        return {**row, **nsys.run_worker(spec, out_dir, "tracekit.collectors.tflow.collect")}
    workload = build(spec.variant, spec.config, gpu, spec.seed)
    warmup_s = _warm_up(workload, spec)
    row["timing"] = {**time_steps(workload.step, spec.repeats, sync=_sync(spec), cpu_clock="process_time",
                                 min_time_s=MIN_TIMED_S),
                     "warmup_s": round(warmup_s, 4)}
    if spec.profiler == "tf":
        trace, profiled = _profile_tf(spec, workload, out_dir)
        row.update(profiler_version=f"tf.profiler {tf.__version__}", tf_capture=CAPTURE, traces=[trace],
                   profiled_timing=profiled)
    elif spec.profiler in REMOTE_OPTIONS:
        options = REMOTE_OPTIONS[spec.profiler]
        # Long enough for the profiled steps at level 3 (tracing slows them), and a margin to start.
        duration_ms = 300 + int(5 * row["timing"]["wall_ns"]["median"] * spec.profiled_steps / 1e6)
        trace, profiled = _profile_tf_remote(spec, workload, out_dir, duration_ms, options)
        row.update(profiler_version=f"tf.profiler {tf.__version__} via xprof client", traces=[trace],
                   profiled_timing=profiled,
                   tf_capture={"method": f"profiler server + xprof client, {duration_ms} ms", **options})
    return row


def _timed_steps(workload: Workload, spec: RunSpec) -> list[int]:
    sync = _sync(spec)
    walls = []
    for _ in range(spec.profiled_steps):
        t0 = time.perf_counter_ns()
        workload.step()
        if sync is not None:
            sync()
        walls.append(time.perf_counter_ns() - t0)
    return walls


@contextlib.contextmanager
def _capture_into(spec: RunSpec, out_dir: Path) -> Iterator[tuple[Path, str]]:
    """A scratch log directory for one capture; on success its one .xplane.pb becomes the trace."""
    rel = Path("traces") / "tf" / spec.variant / f"{spec.file_stem}.xplane.pb"
    final = out_dir / rel
    final.parent.mkdir(parents=True, exist_ok=True)
    logdir = final.parent / f".{spec.file_stem}.logdir"
    shutil.rmtree(logdir, ignore_errors=True)
    try:
        yield logdir, rel.as_posix()
        written = sorted(logdir.glob("plugins/profile/*/*.xplane.pb"))
        if len(written) != 1:
            raise RuntimeError(f"the TF profiler wrote {len(written)} .xplane.pb files under {logdir}, expected 1")
        os.replace(written[0], final)
    finally:
        shutil.rmtree(logdir, ignore_errors=True)


def _profile_tf(spec: RunSpec, workload: Workload, out_dir: Path) -> tuple[str, dict[str, Any]]:
    with _capture_into(spec, out_dir) as (logdir, rel):
        tf.profiler.experimental.start(str(logdir))
        try:
            walls = _timed_steps(workload, spec)
        finally:
            tf.profiler.experimental.stop()
    return rel, {"wall_ns": summarize(walls)}


def _profile_tf_remote(spec: RunSpec, workload: Workload, out_dir: Path, duration_ms: int,
                       options: dict[str, int]) -> tuple[str, dict[str, Any]]:
    try:
        from xprof.convert import _pywrap_profiler_plugin as xprof_client
    except ImportError:
        raise RuntimeError(f"--profiler {spec.profiler} needs the xprof package: pip install 'tracekit[tf-trace]'") from None
    from tensorflow.python.profiler.internal import _pywrap_traceme

    global _server_port
    if _server_port is None:  # one profiler server per process
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            _server_port = probe.getsockname()[1]
        tf.profiler.experimental.server.start(_server_port)
    with _capture_into(spec, out_dir) as (logdir, rel):
        failure: list[BaseException] = []

        def capture() -> None:
            try:
                xprof_client.trace(f"127.0.0.1:{_server_port}", str(logdir), "", True, duration_ms, 3, options)
            except BaseException as e:  # re-raised in the caller's thread
                failure.append(e)

        client = threading.Thread(target=capture, name="tracekit-capture")
        client.start()
        # Run exactly the profiled steps, once the server has switched tracing on.
        deadline = time.monotonic() + 30
        while not _pywrap_traceme.traceme_enabled() and client.is_alive() and time.monotonic() < deadline:
            time.sleep(0.001)
        walls = _timed_steps(workload, spec) if _pywrap_traceme.traceme_enabled() else []
        if walls and not _pywrap_traceme.traceme_enabled():
            failure.append(RuntimeError(f"the {duration_ms} ms capture ended before the profiled steps did"))
        client.join()
        if failure:
            raise failure[0]
        if not walls:
            raise RuntimeError("the profiler server never started tracing")
    return rel, {"wall_ns": summarize(walls)}


def _nsys_timing(spec: RunSpec) -> dict[str, Any]:
    """In the child under nsys: warm up, then the profiled steps in their NVTX ranges."""
    _setup(spec)
    workload = build(spec.variant, spec.config, spec.device == "cuda", spec.seed)
    _warm_up(workload, spec)
    return time_steps(workload.step, spec.profiled_steps, sync=_sync(spec), cpu_clock="process_time")


if __name__ == "__main__":
    raise SystemExit(nsys.serve_worker("tracekit.collectors.tflow.collect", _nsys_timing))
