"""TF ops are named by the op they ran: eager ops (all ``EagerExecute`` events) by their child
``EagerLocalExecute: MatMul``, and in comparisons by op type with oneDNN's rewrite undone, so an
eager capture and its graph-mode twin pair up (real TF 2.21 captures in ../shared/traces)."""

from __future__ import annotations

import pytest
from conftest import TRACES, needs_shared

import tracekit
from tracekit.analyze.classify import classify_rows, tf_base_op
from tracekit.analyze.frame import frame_of
from tracekit.analyze.top_ops import top_ops

TF = TRACES / "xprof" / "cpu_tf2.21"


@needs_shared
def test_eager_ops_are_ranked_by_the_op_they_ran_not_as_one_eager_execute() -> None:
    table = tracekit.load(TF / "lstm_keras_eager.xplane.pb")
    frame = frame_of(table)
    ops = top_ops(frame, classify_rows(frame), top=100).ops
    assert "EagerExecute" not in set(ops.name)
    assert ops.name.iloc[0] == "EagerLocalExecute: MatMul" and ops.op_class.iloc[0] == "gemm"
    assert {"EagerLocalExecute: Sigmoid", "EagerLocalExecute: Tanh", "EagerLocalExecute: BiasAdd"} <= set(ops.name)
    # The same time, split by op: every EagerExecute row's self time lands in exactly one op's row.
    eager = frame.rows("cpu_op")
    assert ops.calls.sum() == eager.size
    assert ops.self_ns.sum() == pytest.approx(int(frame.dur[eager].sum()), rel=1e-9)


@needs_shared
def test_critical_path_of_eager_steps_names_the_ops() -> None:
    cp = tracekit.critical_path(TF / "lstm_keras_eager.xplane.pb").result
    assert cp.top.name.iloc[0] == "EagerLocalExecute: MatMul"
    assert "EagerExecute" not in set(cp.top.name)


@needs_shared
def test_an_eager_capture_and_its_graph_twin_compare_op_by_op() -> None:
    names = tracekit.compare([TF / "lstm_keras_eager.xplane.pb", TF / "lstm_keras_fn.xplane.pb"],
                             labels=["eager", "graph"]).result.names
    common = set(names[(names.kind == "cpu_op") & (names.status == "common")].name)
    # MatMul ran eagerly as MatMul and in the graph as oneDNN's _MklMatMul: one op type.
    assert {"MatMul", "AddV2", "BiasAdd", "Sigmoid", "Tanh", "Split"} <= common
    assert "_MklMatMul" not in set(names.name) and "EagerExecute" not in set(names.name)


@pytest.mark.parametrize(("event", "op"), [
    ("lstm_1/while/body/_1/lstm_1/while/lstm_cell_1/MatMul:_MklMatMul", "MatMul"),
    ("dense/MatMul:_MklNativeFusedMatMul", "_FusedMatMul"),
    ("bn/FusedBatchNormV3:_MklFusedBatchNormV3", "FusedBatchNormV3"),
    ("EagerLocalExecute: MatMul", "MatMul"),
    ("lstm_1/transpose:_MklTranspose", "Transpose"),
    ("x:_Mklfoo", "_Mklfoo"),  # not a rewrite: the prefix must start an op name
    ("aten::mm", "aten::mm"),
])
def testtf_base_op(event: str, op: str) -> None:
    assert tf_base_op(event) == op


def test_a_tf_function_pairs_up_across_traces_whatever_its_counter() -> None:
    """TF names a traced function __inference_<name>_<counter>, the counter differing between runs:
    Keras's step function is __inference_multi_step_on_iterator_904 in tests/data/tf/keras_fit and
    _1564 in tests/data/tf/mirrored_fit. compare listed it as removed and added, not as the same
    function taking 3.9 ms against 12.2 ms."""
    from pathlib import Path

    data = Path(__file__).parent / "data" / "tf"
    names = tracekit.compare([data / "keras_fit.xplane.pb", data / "mirrored_fit.xplane.pb"]).result.names
    step_fn = names[names.name.str.startswith("__inference_multi_step_on_iterator")]
    assert step_fn.name.tolist() == ["__inference_multi_step_on_iterator"] and step_fn.status.tolist() == ["common"], step_fn
