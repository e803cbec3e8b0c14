"""Build (once, cached) and run the native LSTM baselines of ``baseline_cu/`` over a sweep preset.

Variants: ``cpu_blas`` (C++ and OpenBLAS, any machine), ``cudnn_lstm`` (cuDNN's RNN API) and
``cublas_lstm`` (cuBLAS GEMMs and a fused pointwise kernel), the last two on CUDA devices only.
Each program prints one manifest-format JSON line per config; rows go through the same runner
as the framework collectors, so ``tracekit overhead`` can join them by config.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracekit.collectors import nsys
from tracekit.collectors.runner import Execute, RunSpec, check_choices
from tracekit.collectors.sweep import Preset
from tracekit.collectors.timing import MIN_TIMED_S

from tracekit.errors import TracekitError

SOURCE_DIR = Path(__file__).resolve().parents[1] / "baseline_cu"
VARIANTS = {
    "cpu_blas": "C++ LSTM: one sgemm for all inputs, then per step a recurrent sgemm and a fused loop (OpenBLAS)",
    "cudnn_lstm": "cuDNN RNN API (cudnnRNNForward), PyTorch's algorithm choice: the native GPU reference",
    "cublas_lstm": "cuBLAS LSTM in the style of Appleyard et al.: one input GEMM, per step a GEMM and a fused kernel",
}
PROGRAMS = {"cpu_blas": "lstm_cpu", "cudnn_lstm": "lstm_cudnn", "cublas_lstm": "lstm_cublas"}
PROFILERS = ("none", "nsys")
# Tolerances of the output check against a double-precision reference, by the math the program
# reports ("math"; its dtype when it reports none). TF32 keeps 10 mantissa bits: cuDNN's default math
# on Ampere and later was 1.5e-4 to 1.8e-4 off on an H100 at hidden 128-256, while a wrong weight
# layout or gate order is off by 0.1 or more.
TOLERANCE = {"fp32": 1e-4, "tf32": 2e-3, "fp16": 2e-2}


class BaselineError(TracekitError):
    """The baseline could not be built or run."""


@dataclass(frozen=True)
class Build:
    directory: Path
    cuda: bool

    def program(self, variant: str) -> Path:
        return self.directory / PROGRAMS[variant]


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tracekit"


def source_hash(cuda: bool, blas: str = "") -> str:
    """Identity of a build: every source file, whether the CUDA programs are wanted, and the BLAS."""
    digest = hashlib.sha256((b"cuda" if cuda else b"cpu") + blas.encode())
    for path in sorted(SOURCE_DIR.rglob("*")):
        if path.is_file() and path.suffix in (".cpp", ".cu", ".cuh", ".hpp", ".txt"):
            digest.update(path.relative_to(SOURCE_DIR).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def _tool(name: str, module: str, attribute: str) -> str | None:
    """A build tool on PATH, else the one a PyPI wheel (``cmake``, ``ninja``) installed beside Python."""
    found = shutil.which(name)
    if found:
        return found
    try:
        directory = getattr(__import__(module), attribute)
    except (ImportError, AttributeError):
        return None
    candidate = Path(directory) / name
    return str(candidate) if candidate.exists() else None


def wheel_openblas() -> Path | None:
    """The scipy-openblas32 wheel's directory (include/cblas.h, lib/libscipy_openblas.so), if installed."""
    try:
        import scipy_openblas32  # type: ignore[import-not-found]
    except ImportError:
        return None
    root = Path(scipy_openblas32.get_lib_dir()).parent
    return root if (root / "include" / "cblas.h").exists() else None


def _cxx_compiler() -> str | None:
    for name in filter(None, (os.environ.get("CXX"), "c++", "g++", "clang++")):
        if shutil.which(name):
            return name
    return None


def _first_error(log: str) -> str:
    """The line of a CMake / compiler log that says what went wrong (not the call stack around it)."""
    lines = [ln.strip() for ln in log.splitlines()]
    for i, line in enumerate(lines):
        if line.startswith("CMake Error"):
            # CMake's message is the indented paragraph after this line; the call stack follows a blank line.
            message: list[str] = []
            for text in lines[i + 1:]:
                if not text:
                    if message:
                        break
                    continue
                message.append(text)
            return " ".join(message) or line
        if ": error:" in line or ": fatal error:" in line or line.startswith(("ld:", "collect2:")):
            return line
    rest = [ln for ln in lines if ln]
    return rest[-1] if rest else "no output"


def build(cuda: bool, build_root: Path | None = None) -> Build:
    """Configure and build with CMake, once per source version; later calls reuse the build.

    Raises BaselineError with one line saying what is missing (cmake, a C++ compiler, OpenBLAS)
    or which error stopped the build; the whole log is kept in the build directory.
    """
    if not (SOURCE_DIR / "CMakeLists.txt").exists():
        raise BaselineError(f"{SOURCE_DIR}: baseline sources not found (tracekit baseline runs from a source checkout)")
    cmake = _tool("cmake", "cmake", "CMAKE_BIN_DIR")
    if cmake is None:
        raise BaselineError("cmake not found: pip install 'tracekit[native]' (or apt-get install cmake)")
    if _cxx_compiler() is None:
        raise BaselineError("no C++ compiler found (c++, g++ or clang++): install one (Debian: apt-get install g++)")
    openblas = wheel_openblas()
    directory = (build_root or _cache_root() / "baseline-build") / source_hash(cuda, str(openblas or "system"))
    wanted = ["cpu_blas"] + (["cudnn_lstm", "cublas_lstm"] if cuda else [])
    result = Build(directory, cuda)
    if all(result.program(v).exists() for v in wanted):
        return result
    args = [cmake, "-S", str(SOURCE_DIR), "-B", str(directory), f"-DBASELINE_CUDA={'ON' if cuda else 'OFF'}"]
    ninja = _tool("ninja", "ninja", "BIN_DIR")
    if ninja is not None:
        args += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"]
    if openblas is not None:
        args.append(f"-DOPENBLAS_ROOT={openblas}")
    if cuda:
        args += _cuda_arguments()
    directory.mkdir(parents=True, exist_ok=True)
    log_path = directory / "build.log"
    with open(log_path, "w", encoding="utf-8") as log:
        for step in (args, [cmake, "--build", str(directory), "-j", str(os.cpu_count() or 2)]):
            run = subprocess.run(step, capture_output=True, text=True)
            log.write(f"$ {' '.join(step)}\n{run.stdout}{run.stderr}\n")
            if run.returncode != 0:
                what = "configuring" if step is args else "compiling"
                raise BaselineError(f"{what} baseline_cu failed: {_first_error(run.stdout + run.stderr)[:300]} "
                                    f"(log: {log_path})")
    return result


def _cuda_arguments() -> list[str]:
    args = []
    deps = _cache_root() / "cuda-deps"
    if deps.exists():
        args.append(f"-DCUDA_DEPS_ROOT={deps}")
    else:  # a GPU machine with PyTorch has the full nvidia-cublas / nvidia-cudnn wheels installed
        prefixes = [str(Path(p).parent) for p in library_path().split(os.pathsep) if p.endswith("/lib")]
        if prefixes:
            args.append(f"-DCMAKE_PREFIX_PATH={';'.join(prefixes)}")
    nvcc = shutil.which("nvcc")
    if nvcc:
        args.append(f"-DCMAKE_CUDA_COMPILER={Path(nvcc).resolve()}")
    return args


def default_variants(device: str) -> list[str]:
    return ["cpu_blas"] if device == "cpu" else ["cudnn_lstm", "cublas_lstm"]


def specs(variants: Sequence[str], preset: Preset, device: str, profilers: Sequence[str], seed: int = 0,
          threads: int = 1, dtypes: Sequence[str] = ("fp32",)) -> list[RunSpec]:
    check_choices("baseline", variants, VARIANTS, profilers, PROFILERS)
    out = []
    for variant in variants:
        on_gpu = variant != "cpu_blas"
        skip = "needs a CUDA device" if on_gpu and device != "cuda" else None
        for dtype in dtypes if on_gpu else ("fp32",):
            for config in preset.layer_configs():
                for profiler in profilers:
                    out.append(RunSpec("native", variant, "baseline", "cuda" if on_gpu else "cpu", dtype,
                                       config.as_dict(), profiler, preset.name, preset.warmup, preset.repeats,
                                       preset.profiled_steps, seed, threads, skip))
    return out


def command(program: Path, spec: RunSpec) -> list[str]:
    c = spec.config
    args = [str(program), "--config", f"{c['hidden']},{c['batch']},{c['timesteps']},{c['input']}",
            "--warmup", str(spec.warmup), "--repeats", str(spec.repeats), "--seed", str(spec.seed)]
    if spec.profiler != "nsys":  # under nsys each timed call is a step range: keep to the preset's count
        args += ["--min-time-ms", f"{MIN_TIMED_S * 1e3:g}"]
    if spec.variant == "cpu_blas":
        args += ["--threads", str(max(spec.threads, 1))]
    else:
        args += ["--dtype", spec.dtype]
    return args


def library_path() -> str:
    """LD_LIBRARY_PATH for the CUDA programs: the full cuBLAS/cuDNN libraries of installed ``nvidia-*``
    wheels (as PyTorch's GPU build brings them), ahead of whatever is set already."""
    dirs: list[str] = []
    try:
        import nvidia  # namespace package of the nvidia-* wheels

        for root in getattr(nvidia, "__path__", []):
            dirs += sorted(str(p) for p in Path(root).glob("*/lib") if p.is_dir())
    except ImportError:
        pass
    return os.pathsep.join(filter(None, [*dirs, os.environ.get("LD_LIBRARY_PATH", "")]))


def executor(built: Build) -> Execute:
    """An ``execute(spec, out_dir)`` for the runner, bound to one build."""

    def execute(spec: RunSpec, out_dir: Path) -> dict[str, Any]:
        cmd = command(built.program(spec.variant), spec)
        env = {**os.environ, "LD_LIBRARY_PATH": library_path()} if spec.device == "cuda" else None
        row: dict[str, Any] = {"traces": []}
        if spec.profiler == "nsys":
            base = out_dir / "traces" / "nsys" / "native" / spec.variant / spec.file_stem
            sqlite = nsys.profile(cmd, base, gpu=spec.device == "cuda", env=env)
            rel = sqlite.relative_to(out_dir).as_posix()
            row.update(traces=[rel, rel[: -len(".sqlite")] + ".nsys-rep"], profiler_version=f"nsys {nsys.version(nsys.find_nsys())}")
        # Timing and the output check come from a run with no profiler attached.
        run = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if run.returncode != 0:
            raise BaselineError(f"{cmd[0]} exited {run.returncode}: {(run.stderr or run.stdout).strip()[-300:]}")
        result = json.loads(run.stdout.strip().splitlines()[-1])
        check = result.get("check")
        tolerance = TOLERANCE.get(result.get("math", ""), TOLERANCE[spec.dtype])
        if check and check["max_abs_err"] > tolerance:
            raise BaselineError(f"output differs from the reference by {check['max_abs_err']:.3g} "
                                f"(tolerance {tolerance} for {result.get('math', spec.dtype)} math)")
        for key in ("framework_version", "device_name", "threads", "timing", "check", "algo", "algo_requested",
                    "kernels_per_step", "math"):
            if key in result:
                row[key] = result[key]
        return row

    return execute
