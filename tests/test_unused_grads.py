"""Gradients computed for parameters the optimizer never updates (tracekit.analyze.unused_grads), on real
captures made by tests/data/cpu/make_unused_grads.py: a linear head fine-tuned over a conv backbone
left requiring grad (SGD, and Adam with foreach lists), frozen, and trained whole."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tracekit import api
from tracekit.analyze.frame import frame_of
from tracekit.analyze.unused_grads import shapes_in, unused_gradients
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


@pytest.mark.parametrize(("name", "optimizer"), [("unused_grads", "SGD"), ("unused_grads_foreach", "Adam")])
def test_a_backbone_left_requiring_grad_under_a_trained_head_is_told_to_freeze(name: str, optimizer: str) -> None:
    """160 ms a step unfrozen against 50 ms frozen: the backbone's backward is for nothing. Its 16
    gradients (4 convs' weights and biases, 4 BatchNorms') have shapes no optimizer op touches, one op a
    tensor (SGD) or lists of them (Adam's _foreach_ ops)."""
    found = unused_gradients(frame_of(load(DATA / f"{name}.pt.trace.json.gz")), None)
    assert found is not None
    assert (found.gradients, found.unused, found.optimizer) == (18, 16, optimizer)
    assert found.shapes[0] == "128x64x3x3"
    assert 0.5 < found.share < 0.8  # the frozen step took 31% of the unfrozen one's time
    r = api.report(DATA / f"{name}.pt.trace.json.gz").launch
    assert any(e.startswith("backward computes 16 of its 18 parameter gradients") for e in r.evidence), r.evidence
    assert r.remedies[0].startswith("freeze the parameters the optimizer does not train"), r.remedies
    doc = json.loads(api.render(api.report(DATA / f"{name}.pt.trace.json.gz"), "json"))
    assert doc["unused_gradients"]["unused_per_step"] == 16


@pytest.mark.parametrize("name", ["unused_grads_frozen", "unused_grads_all"])
def test_a_frozen_backbone_or_one_trained_whole_is_not(name: str) -> None:
    assert unused_gradients(frame_of(load(DATA / f"{name}.pt.trace.json.gz")), None) is None
    assert not any(x.startswith("freeze") for x in api.report(DATA / f"{name}.pt.trace.json.gz").launch.remedies)


def test_without_shapes_nothing_is_claimed() -> None:
    table = load(DATA / "unused_grads.pt.trace.json.gz")
    assert unused_gradients(frame_of(table.drop_columns(["args"])), None) is None


def test_the_optimizershapes_include_tensor_lists_members() -> None:
    """A _foreach_ op's Input Dims hold lists of shapes: each member is a shape the optimizer touches."""
    frame = frame_of(load(DATA / "unused_grads_foreach.pt.trace.json.gz"))
    ops = frame.rows("cpu_op")
    foreach = ops[frame.named(ops, re.compile(r"^aten::_foreach_"))]
    assert {(10, 128), (10,)} <= shapes_in(frame, foreach)


@pytest.mark.parametrize(("text", "shape"), [("[[128,64,3,3]]", (128, 64, 3, 3)), ("[[]]", ()), ("", None), ("[]", None),
                                             ("[[[2],[3]]]", None), ("not json", None)])
def test_a_gradient_shape_is_read_from_accumulate_grads_dims(text: str, shape: tuple[int, ...] | None) -> None:
    """A 0-d parameter's gradient reads [] (kept, counted as neither used nor unused); no dims: None."""
    from tracekit.analyze.unused_grads import _first_shape

    assert _first_shape(text) == shape
