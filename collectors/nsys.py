"""Run a command under Nsight Systems and export its report to SQLite (what tracekit ingests).

``nsys profile`` writes a ``.qdstrm`` stream and converts it with ``QdstrmImporter`` into an
``.nsys-rep``; a target-only ``nsys`` (Debian's ``nsight-systems-target``, the one bundled with
Nsight Compute) has no importer and stops at the ``.qdstrm``. We then run the importer
ourselves when one can be found, or say how to bring the ``.qdstrm`` to a machine that has it:
``python -m tracekit.collectors.nsys import FILE.qdstrm``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracekit.errors import TracekitError

if TYPE_CHECKING:
    from tracekit.collectors.runner import RunSpec

GPU_TRACE = "cuda,nvtx,cudnn,cublas,osrt"
CPU_TRACE = "nvtx,osrt"
HOW_TO_GET = ("install Nsight Systems (https://developer.nvidia.com/nsight-systems), or on Debian/Ubuntu without "
              "root run collectors/get_nsys.sh, which unpacks Debian's nsight-systems 2023.4 (nsys and "
              "QdstrmImporter) into ~/.cache/tracekit/nsys; or pass --nsys PATH / set TRACEKIT_NSYS")


class NsysError(TracekitError):
    """nsys is missing or a profile/import/export step failed."""


def _cache_bin() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tracekit" / "nsys" / "bin"


def find_nsys(explicit: str | None = None) -> Path:
    """The nsys executable: ``explicit``, $TRACEKIT_NSYS, PATH, then get_nsys.sh's cache."""
    candidates = [explicit, os.environ.get("TRACEKIT_NSYS"), shutil.which("nsys"), str(_cache_bin() / "nsys")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    if explicit:
        raise NsysError(f"{explicit}: not an executable nsys")
    raise NsysError(f"nsys not found: {HOW_TO_GET}")


def find_importer(nsys: Path | None = None) -> Path | None:
    """QdstrmImporter: $TRACEKIT_QDSTRM_IMPORTER, PATH, beside nsys, then get_nsys.sh's cache."""
    candidates = [os.environ.get("TRACEKIT_QDSTRM_IMPORTER"), shutil.which("QdstrmImporter")]
    if nsys is not None:
        real = nsys.resolve().parent
        candidates += [str(nsys.parent / "QdstrmImporter"), str(real.parent / "host-linux-x64" / "QdstrmImporter")]
    candidates.append(str(_cache_bin() / "QdstrmImporter"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def version(nsys: Path) -> str:
    out = subprocess.run([str(nsys), "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.strip().rsplit(" ", 1)[-1] if out.returncode == 0 else "unknown"


def profile_command(nsys: Path, base: Path, command: Sequence[str], gpu: bool) -> list[str]:
    """``nsys profile`` for one run. On CPU: NVTX and OS runtime only. No sampling (needs no perf access).

    On GPU, ``--cuda-graph-trace=node`` keeps every kernel of a CUDA graph (torch.compile's
    reduce-overhead mode) instead of one graph-level row.
    """
    # No CPU sampling or context-switch tracing anywhere: tracekit reads neither, and in a VM without
    # perf events (an H100 under Firecracker) the target nsys kept streaming a .qdstrm (1.9 GB in
    # 95 s) after a 2-second program had ended.
    args = [str(nsys), "profile", "--force-overwrite=true", "-o", str(base), "--sample=none", "--cpuctxsw=none"]
    if gpu:
        args += ["-t", GPU_TRACE, "--cuda-graph-trace=node"]
    else:
        args += ["-t", CPU_TRACE]
    return args + list(command)


def profile(command: Sequence[str], base: Path, gpu: bool, nsys: Path | None = None,
            env: dict[str, str] | None = None, timeout_s: float | None = None) -> Path:
    """Profile ``command`` into ``base``.sqlite (and ``base``.nsys-rep); returns the SQLite path.

    Raises NsysError naming the step that failed, with the tail of nsys's output.
    """
    nsys = nsys or find_nsys()
    base.parent.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(profile_command(nsys, base, command, gpu), capture_output=True, text=True,
                         env=env, timeout=timeout_s)
    rep, qdstrm = base.with_suffix(".nsys-rep"), base.with_suffix(".qdstrm")
    if run.returncode != 0:
        raise NsysError(f"nsys profile exited {run.returncode}: {_tail(run.stdout + run.stderr)}")
    if not rep.exists() and qdstrm.exists():
        import_qdstrm(qdstrm, find_importer(nsys))
    if not rep.exists():
        raise NsysError(f"nsys profile wrote no report for {base}: {_tail(run.stdout + run.stderr)}")
    return export_sqlite(rep, nsys)


def run_worker(spec: RunSpec, out_dir: Path, worker_module: str) -> dict[str, Any]:
    """Run ``python -m worker_module worker SPEC TIMING`` under nsys; the manifest fields of the run.

    The worker builds the workload, warms up and runs the profiled steps in NVTX ranges, and
    writes its step timing (measured under nsys) and NVTX backend to TIMING.
    """
    exe = find_nsys()
    rel_dir = Path("traces") / "nsys" / spec.framework / spec.variant
    base = out_dir / rel_dir / spec.file_stem
    timing_file = base.with_suffix(".timing.json")
    command = [sys.executable, "-m", worker_module, "worker", spec.to_json(), str(timing_file)]
    # The child must import the collectors from wherever this process did.
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    try:
        sqlite = profile(command, base, gpu=spec.device == "cuda", nsys=exe, env=env)
        worker = json.loads(timing_file.read_text())
    finally:
        timing_file.unlink(missing_ok=True)
    return {"profiler_version": f"nsys {version(exe)}", "profiled_timing": worker["timing"], "nvtx": worker["nvtx"],
            "traces": [(rel_dir / sqlite.name).as_posix(), (rel_dir / f"{spec.file_stem}.nsys-rep").as_posix()]}


def serve_worker(module: str, profiled_timing: Callable[[RunSpec], dict[str, Any]]) -> int:
    """The child side of ``run_worker``: ``python -m MODULE worker SPEC_JSON TIMING_PATH``.

    ``profiled_timing(spec)`` builds, warms up and times the profiled steps (in their NVTX ranges);
    its result and the NVTX backend go to TIMING_PATH for the parent's manifest row.
    """
    from tracekit.collectors import phases
    from tracekit.collectors.runner import spec_from_json

    if len(sys.argv) != 4 or sys.argv[1] != "worker":
        sys.stderr.write(f"usage: python -m {module} worker SPEC_JSON TIMING_PATH (run by nsys)\n")
        return 2
    timing = profiled_timing(spec_from_json(sys.argv[2]))
    Path(sys.argv[3]).write_text(json.dumps({"timing": timing, "nvtx": phases.backend()}))
    return 0


def import_qdstrm(qdstrm: Path, importer: Path | None) -> Path:
    """Turn a ``.qdstrm`` into an ``.nsys-rep`` with QdstrmImporter, then delete the (large) stream."""
    if importer is None:
        raise NsysError(f"{qdstrm}: nsys wrote a .qdstrm but no QdstrmImporter was found to convert it; "
                        f"copy it to a machine with one (collectors/get_nsys.sh provides it) and run "
                        f"`python -m tracekit.collectors.nsys import {qdstrm.name}`")
    written_by, importer_version = stream_version(qdstrm), _release(_version_text(importer))
    if written_by and importer_version and _release(written_by) != importer_version:
        # An importer reads only its own release's streams (2023.4 fails on a 2025.3 stream with
        # "Data member TimestampType was not initialized").
        raise NsysError(f"{qdstrm}: written by Nsight Systems {written_by}, but the QdstrmImporter found is "
                        f"{importer_version}: import it with the QdstrmImporter of the same release "
                        f"(set TRACEKIT_QDSTRM_IMPORTER)")
    run = subprocess.run([str(importer), "-i", str(qdstrm)], capture_output=True, text=True)
    rep = qdstrm.with_suffix(".nsys-rep")
    if run.returncode != 0 or not rep.exists():
        raise NsysError(f"{qdstrm}: QdstrmImporter failed ({run.returncode}): {_tail(run.stdout + run.stderr)}")
    qdstrm.unlink()
    return rep


_STREAM_VERSION = re.compile(rb"NVIDIA Nsight Systems Stream (\d+\.\d+(?:\.\d+)*)")
_VERSION = re.compile(r"(\d{4}\.\d+(?:\.\d+)*)")


def stream_version(qdstrm: Path) -> str | None:
    """The Nsight Systems release that wrote a ``.qdstrm``, from its header ("...Stream 2025.3.1.0")."""
    with qdstrm.open("rb") as f:
        found = _STREAM_VERSION.search(f.read(4096))
    return found.group(1).decode() if found else None


def _version_text(program: Path) -> str:
    try:
        out = subprocess.run([str(program), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout + out.stderr


def _release(text: str) -> str | None:
    """Year.major of a Nsight Systems version string ("2023.4.4.54-..." -> "2023.4")."""
    found = _VERSION.search(text)
    return ".".join(found.group(1).split(".")[:2]) if found else None


def export_sqlite(rep: Path, nsys: Path | None = None) -> Path:
    """``nsys export --type sqlite`` next to the report, written atomically."""
    nsys = nsys or find_nsys()
    out = rep.with_suffix(".sqlite")
    tmp = rep.with_suffix(".sqlite.tmp")
    run = subprocess.run([str(nsys), "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(tmp), str(rep)],
                         capture_output=True, text=True)
    if run.returncode != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        raise NsysError(f"{rep}: nsys export failed ({run.returncode}): {_tail(run.stdout + run.stderr)}")
    os.replace(tmp, out)
    return out


def _tail(text: str) -> str:
    # nsys draws progress bars with carriage returns; keep the last real lines.
    lines = [ln.rsplit("\r", 1)[-1].strip() for ln in text.splitlines()]
    return " | ".join(ln for ln in lines if ln)[-400:] or "no output"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tracekit.collectors.nsys import FILE.qdstrm...``: import and export streams made elsewhere."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] != "import":
        sys.stderr.write("usage: python -m tracekit.collectors.nsys import FILE.qdstrm...\n")
        return 2
    try:
        nsys = find_nsys()
        for name in argv[1:]:
            print(export_sqlite(import_qdstrm(Path(name), find_importer(nsys)), nsys))
    except NsysError as e:
        sys.stderr.write(f"tracekit.collectors.nsys: error: {e.one_line()}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
