"""XLA ops are classed by what their HLO instruction computes (the modules on the XSpace's
``/host:metadata`` plane), not by names that say how XLA built them. Real JAX and TF captures."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TRACES, needs_shared

import tracekit
from tracekit.ingest import hlo, xplane
from tracekit.ingest.columns import trace_extra

DATA = Path(__file__).parent / "data"
SCAN_RNN = DATA / "jax" / "scan_rnn.xplane.pb"  # jitted tanh RNN and its gradient, jax 0.10.2 on CPU
TWO_MODULES = DATA / "jax" / "hlo_modules.xplane.pb"  # ynn_fusion: a dot in jit_project, a reduce in jit_total


def _hlo_protos(path: Path) -> dict[str, bytes]:
    plane = xplane.metadata_plane(path)
    assert plane is not None
    names = {k: v.name for k, v in plane.stat_metadata.items()}
    return {m.name: s.bytes_value for m in plane.event_metadata.values() for s in m.stats
            if names.get(s.metadata_id) == "Hlo Proto"}


def _op_classes(trace: Path) -> dict[str, set[str]]:
    ops = tracekit.report(trace).launch.top_ops.ops
    out: dict[str, set[str]] = {}
    for op in ops.itertuples():
        out.setdefault(op.name, set()).add(op.op_class)
    return out


def test_a_fusion_is_the_class_of_what_it_fuses() -> None:
    """jax 0.10's XLA:CPU runs the RNN's matrix products as YNNPACK fusions named ``ynn_fusion.N``;
    its pointwise fusions keep being elementwise."""
    module, classes = hlo.instruction_classes(_hlo_protos(SCAN_RNN)["jit_loss(10)"])
    assert module == "jit_loss"
    assert {classes[n] for n in ("ynn_fusion", "ynn_fusion.1", "ynn_fusion.2", "ynn_fusion.3")} == {"gemm"}
    assert classes["add_tanh_fusion"] == classes["multiply_add_fusion"] == "elementwise"
    assert classes["dot_general.20"] == "gemm"  # the dot inside a fused computation
    # Data movement alone (a copy, a slice fusion, a broadcast) is copy, not framework time ("other").
    assert classes["copy.7"] == classes["dynamic-slice_bitcast_fusion"] == classes["wrapped_broadcast"] == "copy"
    assert not any(n.startswith(("while", "parameter", "get-tuple-element")) for n in classes)  # control flow, values


def test_an_xla_copy_is_data_movement_not_framework_time() -> None:
    """A bare XLA ``copy.5`` had no name rule: "other", counted as framework dispatch."""
    assert _op_classes(SCAN_RNN)["copy.7"] == {"copy"}


def test_the_report_counts_jax_matrix_products_as_gemm() -> None:
    """Before: every ``ynn_fusion`` was elementwise by the ``*_fusion`` name rule, and the step had no GEMM."""
    assert _op_classes(SCAN_RNN)["ynn_fusion.3"] == {"gemm"}
    cpu = tracekit.report(SCAN_RNN).breakdown.cpu_ops
    whole = cpu[cpu.step == -1].iloc[0]
    assert whole.gemm_ns > 0.15 * whole.compute_ns


def test_one_instruction_name_in_two_modules_is_two_ops() -> None:
    """Instruction names are a module's own: ``ynn_fusion`` multiplies in one module and sums in the
    other. Each event names its module and program; the top-ops table keeps the two apart."""
    modules = trace_extra(tracekit.load(TWO_MODULES))["hlo_classes"]
    assert {k.partition("#")[0]: v["ynn_fusion"] for k, v in modules.items()} == {
        "jit_project": "gemm", "jit_total": "reduction"}
    ops = tracekit.report(TWO_MODULES).launch.top_ops.ops
    fusions = ops[ops.name == "ynn_fusion"].set_index("op_class")
    assert fusions.calls.to_dict() == {"gemm": 4, "reduction": 4}
    evidence = " ".join(tracekit.report(TWO_MODULES).launch.evidence)
    assert "ynn_fusion (gemm)" in evidence


@needs_shared
def test_tf_xla_on_the_cpu_reads_its_modules_too() -> None:
    """tf.function(jit_compile=True): the module has no program_id stat; its name ends in "(0)"."""
    trace = TRACES / "xprof" / "cpu_tf2.21" / "lstm_keras_xla_fn.xplane.pb"
    (classes,) = trace_extra(tracekit.load(trace))["hlo_classes"].values()
    assert classes["MatMul.8"] == classes["MatMul_1.10"] == "gemm"
    assert classes["compare_and_fusion"] == "elementwise"
    assert _op_classes(trace)["MatMul.8"] == {"gemm"}


def test_a_module_that_does_not_parse_is_noted_and_its_ops_go_by_name(tmp_path: Path) -> None:
    space = xplane.XSpace()
    space.ParseFromString(TWO_MODULES.read_bytes())
    (plane,) = [p for p in space.planes if p.name == "/host:metadata"]
    names = {k: v.name for k, v in plane.stat_metadata.items()}
    for m in plane.event_metadata.values():
        for s in m.stats:
            if names.get(s.metadata_id) == "Hlo Proto" and m.name.startswith("jit_project"):
                s.bytes_value = s.bytes_value[: len(s.bytes_value) // 2]  # cut inside a field
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(space.SerializeToString())
    table = tracekit.load(cut)
    extra = trace_extra(table)
    assert any(w.startswith("HLO module jit_project") and "not an HloProto" in w for w in extra["warnings"])
    assert [k.partition("#")[0] for k in extra["hlo_classes"]] == ["jit_total"]
    assert _op_classes(cut)["ynn_fusion"] == {"elementwise", "reduction"}  # the name rule for jit_project's
    with pytest.raises(ValueError, match="not an HloProto"):
        hlo.instruction_classes(b"\x0a\x05abc")


def test_the_metadata_plane_is_read_alone(tmp_path: Path) -> None:
    plane = xplane.metadata_plane(SCAN_RNN)
    assert plane.name == "/host:metadata" and len(plane.event_metadata) == 6
    not_xspace = tmp_path / "x.xplane.pb"
    not_xspace.write_bytes(b"\xff" * 64)
    assert xplane.metadata_plane(not_xspace) is None
    assert xplane.metadata_plane(tmp_path / "absent.xplane.pb") is None


def test_the_classes_survive_a_parquet_round_trip(tmp_path: Path) -> None:
    from tracekit.cli import main

    out = tmp_path / "t.parquet"
    assert main(["ingest", str(TWO_MODULES), "-o", str(out)]) == 0
    assert _op_classes(out)["ynn_fusion"] == {"gemm", "reduction"}
