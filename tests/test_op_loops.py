"""ATen ops that loop over rows inside themselves (tracekit/analyze/op_loops.py): a real capture of an
embedding with max_norm (tests/data/cpu/make_embedding_max_norm.py), and ops with many view children
(unbind, unflatten_dense_tensors) that are no such loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracekit
from tracekit import api
from tracekit.analyze.frame import frame_of
from tracekit.analyze.op_loops import looping_calls, looping_op
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"
MAX_NORM = DATA / "embedding_max_norm.pt.trace.json.gz"


def test_embedding_max_norm_renorm_loop_is_told_with_its_batched_form() -> None:
    """aten::embedding_renorm_ runs a select, a norm, an item (and a mul_ where the row is too long) per
    looked-up row: 1,778 ops a call, 78% of the step. The report read "CPU/framework-bound" with
    torch.compile first, which calls the op as it is (3.72 ms a step compiled against 2.32 eager)."""
    launch = tracekit.report(MAX_NORM).launch
    found = launch.looping_op
    assert found is not None and found.op == "aten::embedding_renorm_" and found.calls == 2
    assert 1_000 < found.children < 3_000 and found.share > 0.5
    assert [n for n, _ in found.child_names[:3]] == ["aten::item", "aten::norm", "aten::select"]
    assert launch.remedies[0].startswith("nn.Embedding(..., max_norm=...) renormalizes"), launch.remedies
    assert not any("torch.compile" in r for r in launch.remedies), launch.remedies
    assert launch.verdict != "CPU/framework-bound"
    assert json.loads(api.render(api.report(MAX_NORM), "json"))["looping_op"]["op"] == "aten::embedding_renorm_"


def test_the_loop_inside_the_op_is_no_dispatch_a_compiler_removes() -> None:
    """The op's child ops and the time between them are its own: no-dispatch keeps them."""
    whatif = tracekit.whatif(MAX_NORM).result
    saving = {s.name: s.saving_ns / whatif.measured_step_ns for s in whatif.scenarios}
    assert saving.get("no-dispatch", 0) < 0.15, saving


def test_ops_with_many_view_children_are_no_loop() -> None:
    """aten::unbind makes one select a piece, by design (a batch of 256 iterated in Python)."""
    frame = frame_of(load(DATA / "sample_loop_metric.pt.trace.json.gz"))
    assert looping_op(frame, None) is None and looping_calls(frame).size == 0


def test_unflatten_dense_tensors_is_no_loop() -> None:
    path = SHARED / "hta" / "nccl_parser_config" / "nccl_data.json.gz"
    if not path.exists():
        pytest.skip("../shared/traces is absent: HTA's nccl_data sample is read from there")
    assert looping_calls(frame_of(load(path))).size == 0
