"""The tests that capture live CPU traces and judge them, run again with PyTorch's and oneDNN's
kernels held to AVX2, as on the many users' CPUs without AVX-512, AMX or native bf16.

What those tests assert rests on how fast the CPU's kernels are: a step's cast share, a GEMM's
share, what a what-if scenario saves. On a Xeon with AMX, bf16 autocast's weight casts were half
a step; with the same torch on an AVX2-only CPU the emulated bf16 GEMMs took most of it and the
casts fell under the verdict's threshold, and CI on such a machine failed where every run here
passed. ``ATEN_CPU_CAPABILITY=avx2`` picks ATen's AVX2 kernels and ``ONEDNN_MAX_CPU_ISA=AVX2``
oneDNN's, so this machine runs the kernels an AVX2-only one would.

Left out: TensorFlow's bf16 collectors (TF picks oneDNN's bf16 kernels from the CPU's own flags,
which the limit then refuses, and aborts; on a real AVX2 CPU it falls back to Eigen). Inductor
gets a cache directory of its own: a cached kernel built for AVX-512 is otherwise reused.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LIVE_CAPTURE_TESTS = ["test_verdicts.py", "test_whatif.py", "test_critical_path.py", "test_lstm_cpu_reports.py",
                      "test_top_ops.py", "test_steps.py", "test_stalls.py", "test_host_attribution.py",
                      "test_compiled_code.py", "test_step_inference.py"]


@pytest.mark.slow
def test_live_capture_tests_hold_with_avx2_kernels(tmp_path):
    torch = pytest.importorskip("torch")
    capability = torch.backends.cpu.get_cpu_capability()
    if capability != "AVX512":
        pytest.skip(f"ATen runs its {capability} kernels on this CPU, not AVX-512: the main run covers it")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                           env=env, capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "AVX2", probe.stdout  # the limit took: ATen runs its AVX2 kernels
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:logging",
                          *[str(ROOT / "tests" / name) for name in LIVE_CAPTURE_TESTS]],
                         env=env, cwd=ROOT, capture_output=True, text=True)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-2000:]
    failed = [line for line in run.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    # What each failure asserted (pytest's "E" lines), so that a failure here says why.
    why = [line for line in run.stdout.splitlines() if line.startswith("E ")][:40]
    assert run.returncode == 0, "\n".join([summary, *failed, *why])
