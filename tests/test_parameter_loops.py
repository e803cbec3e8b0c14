"""Python loops over the parameters outside the optimizer (tracekit.analyze.parameter_loops), on real
captures made by tests/data/cpu/make_parameter_loops.py: an MLP trained with AdamW and an EMA of its
weights updated a tensor at a time (with and without gradient clipping a tensor at a time), with the
EMA as one foreach op, and with none."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tracekit
from tracekit import api
from tracekit.analyze.frame import frame_of
from tracekit.analyze.parameter_loops import _OTHER, _PARAM, _SCALAR, _kind, _runs, parameter_loop
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def test_an_ema_updated_a_tensor_at_a_time_is_told_to_use_one_foreach_op() -> None:
    """The EMA took 390 µs of a 3.9 ms step between training steps, 136 µs as torch._foreach_lerp_ (the
    step 3.6 ms): 50 tensors, three ops each, after the optimizer step."""
    found = parameter_loop(frame_of(load(DATA / "parameter_loop_ema.pt.trace.json.gz")), None)
    assert found is not None
    assert (found.loops, found.ops, found.tensors, found.where) == (1, 150, 50, "after the optimizer step")
    assert set(found.op_names) == {"aten::sub", "aten::mul", "aten::sub_"}
    assert 0.08 < found.share < 0.3  # unprofiled, the loop was 14% of the step (0.53 of 3.92 ms)
    # What the trace can show it saves (the loop's time outside its ops' arithmetic) is less than the
    # loop and about what the foreach EMA saved unprofiled (0.28 of 3.92 ms: 7%).
    assert 0.04 < found.saving < found.share
    r = api.report(DATA / "parameter_loop_ema.pt.trace.json.gz").launch
    assert any(e.startswith("a Python loop over the parameters after the optimizer step") for e in r.evidence), r.evidence
    fix = next(x for x in r.remedies if x.startswith("do the loop over the parameters"))
    assert "torch._foreach_lerp_(ema_tensors, model_tensors, 1 - decay)" in fix and "clip_grad_norm_" not in fix
    doc = json.loads(api.render(api.report(DATA / "parameter_loop_ema.pt.trace.json.gz"), "json"))
    assert doc["parameter_loop"]["tensors"] == 50 and doc["parameter_loop"]["where"] == "after the optimizer step"


def test_diffusers_ema_model_is_such_a_loop() -> None:
    """diffusers' EMAModel with its default foreach=False, after a Hugging Face GPT-2's AdamW step (52
    tensors, 4.7M parameters): 2.61 ms a step, 0.93 ms as one torch._foreach_lerp_. Its clipping
    (clip_grad_norm_, foreach by default) is one _foreach_norm, no loop."""
    found = parameter_loop(frame_of(load(DATA / "parameter_loop_diffusers_ema.pt.trace.json.gz")), None)
    assert found is not None
    assert (found.loops, found.tensors, found.where) == (1, 52, "after the optimizer step")
    assert set(found.op_names) == {"aten::sub", "aten::mul", "aten::sub_"}
    assert 0.03 < found.share < 0.2  # unprofiled, 2.61 ms of a ~65 ms step
    assert "diffusers' EMAModel" in found.remedy()


def test_an_ema_callback_under_lightning_is_after_the_step_and_not_mixed_with_adams_own_ops() -> None:
    """Lightning marks its profiler steps inside the optimizer call's closure, so the update after the
    mark nests under the next step, not the call (found by time instead), and the profile begins inside
    a call whose range is not recorded: its AdamW ops stand right before the callback's EMA, in one run
    with it. They are cut off (the optimizer's own op names), and the EMA reads as after the step."""
    found = parameter_loop(frame_of(load(DATA / "parameter_loop_lightning_ema.pt.trace.json.gz")), None)
    assert found is not None
    assert (found.loops, found.tensors, found.where, found.purposes) == (1, 50, "after the optimizer step", {"average"})
    assert set(found.op_names) == {"aten::sub", "aten::mul", "aten::sub_"}
    assert found.share < 0.12  # with AdamW's stray ops counted it read 16%


def test_yolos_ema_over_the_state_dict_counts_each_tensor_once() -> None:
    """YOLO's ModelEMA walks the state dict (BatchNorm's running statistics too: 74 floating tensors),
    detaching each tensor three times (both state_dict() calls and .detach()) but scaling and adding it
    once: the loop's tensors are the count most of its ops share, not the largest."""
    found = parameter_loop(frame_of(load(DATA / "parameter_loop_state_dict_ema.pt.trace.json.gz")), None)
    assert found is not None
    assert (found.tensors, found.where, found.purposes) == (74, "after the optimizer step", {"average"})
    assert {"aten::mul_", "aten::add_", "aten::detach"} <= set(found.op_names)
    assert "YOLO's ModelEMA" in found.remedy()


def test_norms_read_a_tensor_at_a_time_are_told_to_be_read_once() -> None:
    """Per-layer norms of every weight and gradient logged each step, p.grad.norm().item() a tensor at a
    time: a loop of norms that reads each into Python is no clipping."""
    found = parameter_loop(frame_of(load(DATA / "parameter_loop_norm_logging.pt.trace.json.gz")), None)
    assert found is not None
    assert (found.tensors, found.where, found.purposes) == (100, "before the optimizer step", {"reads"})
    assert "torch.stack(torch._foreach_norm(tensors)).tolist()" in found.remedy()
    assert "clip_grad_norm_" not in found.remedy()


def test_clipping_before_the_step_and_an_ema_after_it_are_three_loops() -> None:
    """clip_grad_norm_(foreach=False) walks the gradients twice (their norms, then the scaling) before
    the optimizer step; the EMA walks the weights after it."""
    found = parameter_loop(frame_of(load(DATA / "parameter_loop_clip_ema.pt.trace.json.gz")), None)
    assert found is not None
    assert (found.loops, found.tensors, found.where) == (3, 50, "before and after the optimizer step")
    assert {"aten::linalg_vector_norm", "aten::mul_"} <= set(found.op_names)
    assert found.purposes == {"average", "clipping"}  # the norms' loop and the scaling's before, the EMA after
    assert "gradient clipping with foreach" in found.remedy() and "torch._foreach_lerp_" in found.remedy()


def test_weight_clipping_after_the_step_reads_as_no_average(monkeypatch: pytest.MonkeyPatch) -> None:
    """WGAN's critic clamps every weight after its step, p.data.clamp_(-c, c): a loop of 50 clamp_ calls,
    4% of this step (under MIN_SHARE: not told); below the threshold it is no EMA, and its remedy names
    the foreach ops that clamp."""
    import tracekit.analyze.parameter_loops as loops

    frame = frame_of(load(DATA / "parameter_loop_weight_clipping.pt.trace.json.gz"))
    assert parameter_loop(frame, None) is None
    monkeypatch.setattr(loops, "MIN_SHARE", 0.0)
    found = parameter_loop(frame, None)
    assert found is not None and found.purposes == {"other"} and found.op_names == ("aten::clamp_",)
    assert "torch._foreach_clamp_min_ and torch._foreach_clamp_max_" in found.remedy()
    assert "EMA" not in found.remedy() and "clip_grad_norm_" not in found.remedy()


@pytest.mark.parametrize("name", ["parameter_loop_ema_foreach", "parameter_loop_none"])
def test_an_ema_as_one_foreach_op_or_none_is_not(name: str) -> None:
    assert parameter_loop(frame_of(load(DATA / f"{name}.pt.trace.json.gz")), None) is None
    assert not any(x.startswith("do the loop over the parameters")
                   for x in api.report(DATA / f"{name}.pt.trace.json.gz").launch.remedies)


def test_without_shapes_nothing_is_claimed() -> None:
    table = load(DATA / "parameter_loop_ema.pt.trace.json.gz")
    assert parameter_loop(frame_of(table.drop_columns(["args"])), None) is None


@pytest.mark.parametrize(("name", "why"), [
    ("parameter_loop_eval_forward", "an evaluation forward after the step, its activations of the weights' shape "
                                    "(128x128): its products mark it a forward"),
    ("train_mode_validation", "validation batches in the loop"),
    ("adamw_large_tensors", "the optimizer's own per-parameter ops are inside its range"),
    ("unused_grads", "a fine-tuned head: the backbone's gradients have shapes no optimizer op touches"),
    ("fsdp_units_rank0", "FSDP's collectives and copies around the optimizer step"),
])
def test_training_loops_without_such_a_loop_are_not(name: str, why: str) -> None:
    assert parameter_loop(frame_of(load(DATA / f"{name}.pt.trace.json.gz")), None) is None, why


@pytest.mark.parametrize(("text", "kind"), [("[[128,128],[128,128],[]]", _PARAM), ("[[128],[]]", _PARAM),
                                            ("[[[128,128],[128]],[]]", _PARAM), ("[[],[],[]]", _SCALAR),
                                            ("[[32,128],[128,128],[128]]", _OTHER), ("", _OTHER), ("nope", _OTHER)])
def test_an_op_is_on_parameters_when_every_tensor_it_takes_has_a_parameters_shape(text: str, kind: int) -> None:
    assert _kind(text, {(128, 128), (128,)}) == kind


def test_runs_start_and_end_on_parameter_ops_and_stop_at_other_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    import tracekit.analyze.parameter_loops as loops

    kinds = np.array([_SCALAR, _PARAM, _SCALAR, _PARAM, _SCALAR, _OTHER, _PARAM, _PARAM, _PARAM, _OTHER, _PARAM],
                     np.int8)
    monkeypatch.setattr(loops, "MIN_ITERATIONS", 1)
    assert [r.tolist() for r in _runs(kinds)] == [[1, 2, 3], [6, 7, 8], [10]]
    monkeypatch.setattr(loops, "MIN_ITERATIONS", 3)  # a run of fewer parameter ops is no loop
    assert [r.tolist() for r in _runs(kinds)] == [[6, 7, 8]]
    assert _runs(np.array([_OTHER, _OTHER], np.int8)) == []  # no run at all


def test_a_loop_reads_as_an_average_clipping_or_other_by_where_it_runs_and_its_ops() -> None:
    from tracekit.analyze.parameter_loops import _purpose

    ema, norms, scale = (frozenset({"aten::sub", "aten::mul", "aten::sub_"}), frozenset({"aten::linalg_vector_norm"}),
                         frozenset({"aten::mul_"}))
    assert _purpose([("after", ema)]) == {("after", ema): "average"}
    assert _purpose([("before", ema)]) == {("before", ema): "other"}  # no average of weights before the step
    assert _purpose([("after", frozenset({"aten::mul"}))]) == {("after", frozenset({"aten::mul"})): "other"}  # writes nothing
    assert _purpose([("before", norms), ("before", scale)]) == {("before", norms): "clipping", ("before", scale): "clipping"}
    assert _purpose([("before", scale)]) == {("before", scale): "other"}  # scaling alone: gradients divided by hand
    logged = frozenset({"aten::linalg_vector_norm", "aten::item"})  # a norm read into Python each tensor
    assert _purpose([("before", logged), ("before", scale)]) == {("before", logged): "reads", ("before", scale): "other"}


def test_whatif_replays_the_loops_as_foreach_ops() -> None:
    """foreach-loops: the loops' dispatch and fixed costs go, their arithmetic stays. On the EMA capture
    it predicts 0.941 of the step; the foreach EMA took the unprofiled step to 0.93-0.95 of it (3.93 ->
    3.65-3.72 ms; 4.53 -> 4.30 in a slower run). The report ranks the remedy by it."""
    result = tracekit.whatif(DATA / "parameter_loop_ema.pt.trace.json.gz").result
    scenarios = {s.name: s for s in result.scenarios}
    ratio = scenarios["foreach-loops"].predicted_step_ns / result.replayed_step_ns
    assert 0.90 < ratio < 0.97, ratio
    assert "1 Python loop(s) over the parameters outside the optimizer (150 ops, 50 tensors)" in \
        scenarios["foreach-loops"].assumptions
    assert "foreach-loops" not in {s.name for s in tracekit.whatif(DATA / "parameter_loop_ema_foreach.pt.trace.json.gz")
                                   .result.scenarios}
    evidence = api.report(DATA / "parameter_loop_ema.pt.trace.json.gz").launch.evidence
    assert any(e.startswith("remedies ordered by predicted saving") and "foreach-loops" in e for e in evidence), evidence


def test_frameworks_own_per_tensor_work_is_no_loop() -> None:
    """DDP's reducer copies each bucket back to its gradients after the all-reduce, 10 calls a step on
    the parameters' shapes between the backward and the optimizer step: its own op
    (torch.distributed.ddp.reducer::copy_bucket_to_grad), no ATen op a foreach op replaces."""
    from tracekit.analyze.parameter_loops import loops_in

    read = loops_in(frame_of(load(DATA / "fsdp_ddp_rank0.pt.trace.json.gz")), None)
    assert read is not None and read[0] == []
