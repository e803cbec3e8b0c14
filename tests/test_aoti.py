"""An AOTInductor package (torch.export + aoti_compile_and_package) in a step: its C++ kernels and the
GEMMs it calls through ATen's C shim record no op, so the trace shows long stretches with no op running.
Real captures: tests/data/cpu/make_aoti.py (without and with Python stacks, and compiled with kernel
profiling), beside tests/data/cpu/python_in_step_stack (the step's own Python, which stays so)."""

from __future__ import annotations

from pathlib import Path

import tracekit
from tracekit.analyze.breakdown import aoti_native_calls, compiled_code_self
from tracekit.analyze.classify import OP_CLASSES, classify_op_name, classify_rows
from tracekit.analyze.frame import frame_of
from tracekit.analyze.verdicts import AOTI_KERNEL_PROFILE_REMEDY, KERNEL_PROFILE_REMEDY
from tracekit.analyze.whatif import whatif
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def _verdict(name: str):
    return tracekit.report(load(DATA / f"{name}.pt.trace.json.gz")).launch


def test_the_shims_calls_take_their_aten_ops_class() -> None:
    assert classify_op_name("aoti_torch_cpu_addmm_out") == "gemm"
    assert classify_op_name("aoti_torch_cuda_convolution") == classify_op_name("aten::convolution") == "convolution"
    assert classify_op_name("aoti_torch_cpu_bmm_out") == "gemm"
    assert classify_op_name("aoti_torch_cpu_no_such_op_out") == "other"
    assert classify_op_name("inductor_wrapper_call") == "compiled"


def test_with_kernel_profiling_the_package_is_compute_bound() -> None:
    """The GEMMs were an op of no class (aoti_torch_cpu_addmm_out, 71% of the step): "undetermined"."""
    launch = _verdict("aoti_mlp_kernels")
    assert launch.verdict == "CPU compute-bound", launch.evidence
    frame = frame_of(load(DATA / "aoti_mlp_kernels.pt.trace.json.gz"))
    ops = frame.rows("cpu_op")
    shim = ops[frame.name_code[ops] == frame.names.index("aoti_torch_cpu_addmm_out")]
    assert shim.size == 9 and (classify_rows(frame).op[shim] == OP_CLASSES.index("gemm")).all()
    # The kernels are ops: the wrapper's own time is overhead, not opaque compiled code.
    assert not compiled_code_self(frame)[0].size


def test_with_python_stacks_the_packages_native_call_is_compiled_code_not_python() -> None:
    """The runner's boxed_run call holds 79% of the step with no op inside: the package's kernels, which
    the report called the step's own Python work with a data-pipeline remedy, and a torch.compile remedy."""
    frame = frame_of(load(DATA / "aoti_mlp_stack.pt.trace.json.gz"))
    native = aoti_native_calls(frame)
    assert native.size == 3 and all(frame.name(int(r)).startswith("<built-in method boxed_run") for r in native)
    launch = _verdict("aoti_mlp_stack")
    assert launch.verdict == "undetermined" and launch.python_work is None, launch.evidence
    cpu = launch.breakdown.cpu_ops
    cpu = cpu[cpu.step >= 0]
    assert cpu.compiled_code_ns.sum() > 0.6 * cpu.span_ns.sum()
    said = " ".join(launch.evidence)
    assert "AOTInductor package's native call from Python, 1 a step" in said, said
    assert AOTI_KERNEL_PROFILE_REMEDY in launch.remedies and KERNEL_PROFILE_REMEDY not in launch.remedies
    assert not any("torch.compile" in r or "input pipeline" in r for r in launch.remedies), launch.remedies
    # whatif keeps the package's code (no scenario removes it as dispatch) and has no Python work to keep.
    w = whatif(frame.table)
    assert all(s.saving_ns < 0.25 * w.replayed_step_ns for s in w.scenarios), [(s.name, s.saving_ns) for s in w.scenarios]


def test_without_python_stacks_the_stretches_may_be_native_code() -> None:
    """Nothing in the trace tells the package's kernels from Python: the evidence says both."""
    launch = _verdict("aoti_mlp")
    assert launch.python_work is not None
    assert "or native code that records no op (NumPy, a C++ extension, an AOTInductor package)" in " ".join(
        launch.evidence)


def test_the_steps_own_python_with_stacks_stays_python_work() -> None:
    frame = frame_of(load(DATA / "python_in_step_stack.pt.trace.json.gz"))
    assert not aoti_native_calls(frame).size
    launch = tracekit.report(frame.table).launch
    assert launch.python_work is not None and launch.python_work.python.startswith("in Python"), launch.evidence
    assert not any("AOTInductor" in e for e in launch.evidence)
