"""A batch walked one sample at a time (tracekit.analyze.sample_loop), on real captures made by
tests/data/cpu/make_sample_loop.py: per-sample training and inference loops, metrics read into Python
sample by sample, and loops that walk a tensor by index but cannot be batched (a char-RNN over
timesteps, greedy decoding)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tracekit import api
from tracekit.analyze.frame import frame_of
from tracekit.analyze.sample_loop import sample_loop
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def test_a_training_step_run_per_sample_is_told_to_batch_first() -> None:
    """2.5 ms a step per sample, 0.41 ms batched; the report read "CPU compute-bound" with torch.compile
    first and a skinny-GEMM remedy, and said nothing of the loop."""
    found = sample_loop(frame_of(load(DATA / "sample_loop.pt.trace.json.gz")), None)
    assert found is not None
    assert (found.op, found.walked, found.rows, found.iterations, found.product_rows) == ("aten::slice", "16x128", 1, 16, 1)
    # The forward loop is the smaller part: autograd builds a graph per sample, so backward is per sample too.
    assert 0.1 < found.loop_share < found.share - 0.3 and found.share < 1
    # Batched, the products read each weight once and the ops' fixed costs are paid once: 84% measured.
    assert 0.5 < found.saving < found.share
    r = api.report(DATA / "sample_loop.pt.trace.json.gz").launch
    assert any(e.startswith("the step walks one 16x128 tensor one row at a time") for e in r.evidence), r.evidence
    assert r.remedies[0].startswith("run the model once on the whole batch"), r.remedies
    doc = json.loads(api.render(api.report(DATA / "sample_loop.pt.trace.json.gz"), "json"))
    assert doc["sample_loop"]["iterations"] == 16


def test_an_inference_loop_over_vectors_is_one_too() -> None:
    """model(x[i]): aten::select, each product a matrix-vector one (its N is the sample's one row)."""
    found = sample_loop(frame_of(load(DATA / "sample_loop_inference.pt.trace.json.gz")), None)
    assert found is not None and found.op == "aten::select" and found.iterations == 16
    assert found.share == found.loop_share > 0.8  # no backward


@pytest.mark.parametrize("name", ["sample_loop_char_rnn", "sample_loop_decode"])
def test_loops_whose_iterations_feed_each_other_are_not(name: str) -> None:
    """The char-RNN walks a [T, 1, F] line by timestep (1-row products too); decoding writes each token
    into its buffer along dim 1. Neither can be batched."""
    assert sample_loop(frame_of(load(DATA / f"{name}.pt.trace.json.gz")), None) is None
    r = api.report(DATA / f"{name}.pt.trace.json.gz").launch
    assert not any("whole batch" in x for x in r.remedies)


def test_without_the_index_arguments_nothing_is_claimed() -> None:
    """The windows are read from the index arguments ("Concrete Inputs"), which only record_shapes=True
    records: the same capture without its args is not claimed from the op sequence alone."""
    table = load(DATA / "sample_loop.pt.trace.json.gz")
    assert sample_loop(frame_of(table.drop_columns(["args"])), None) is None


def test_iterating_the_batch_itself_is_a_walk_too() -> None:
    """``for xi, yi in zip(x, y)``: one aten::unbind per tensor up front, no index op per sample; the
    iterations are read from the op sequence repeating once per piece (2.4-3.2 ms a step, as indexed)."""
    found = sample_loop(frame_of(load(DATA / "sample_loop_zip.pt.trace.json.gz")), None)
    assert found is not None
    assert (found.op, found.walked, found.rows, found.iterations, found.product_rows) == ("aten::unbind", "16x128", 1, 16, 1)
    assert 0.1 < found.loop_share < found.share - 0.3
    r = api.report(DATA / "sample_loop_zip.pt.trace.json.gz").launch
    assert any("(iterating it: aten::unbind, then one piece an iteration)" in e for e in r.evidence), r.evidence
    assert r.remedies[0].startswith("run the model once on the whole batch"), r.remedies


def test_a_recurrence_over_unbound_timesteps_is_not() -> None:
    """A hand-written LSTM cell over ``x.unbind(0)`` of [T, B, F]: its iterations repeat one op sequence
    too, but each multiplies the timestep's 16 rows and feeds the next."""
    assert sample_loop(frame_of(load(DATA / "sample_loop_unbind_recurrence.pt.trace.json.gz")), None) is None


@pytest.mark.parametrize(("codes", "repeats", "period"), [
    ([1, 2, 3] * 4, 4, 3), ([1, 2, 1, 3] * 3 + [9], 3, 4), ([1, 1, 1, 1], 4, 1), ([1, 2, 3, 1, 2, 4], 2, 0),
    ([1, 2] * 3, 4, 0), ([], 3, 0)])
def test_an_iteration_is_the_shortest_sequence_repeated_once_per_piece(codes: list[int], repeats: int, period: int) -> None:
    from tracekit.analyze.sample_loop import _period

    assert _period(np.array(codes, np.int64), repeats) == period


def test_per_sample_gradients_by_a_loop_are_a_walk_too() -> None:
    """torch.autograd.grad of each sample's loss inside the loop: the backward's products run in the
    iterations, each summing over the sample's one row (K = 1 of dW = dY^T X, M and N the layer's widths).
    7.2-7.3 ms a step against 3.5-4.7 with torch.func.vmap(grad); the report read "CPU/framework-bound"."""
    found = sample_loop(frame_of(load(DATA / "sample_loop_grads.pt.trace.json.gz")), None)
    assert found is not None
    assert (found.op, found.walked, found.rows, found.iterations, found.product_rows) == ("aten::slice", "32x128", 1, 32, 1)
    assert found.loop_share > 0.9 and found.share == found.loop_share  # the backward runs inside the loop
    r = api.report(DATA / "sample_loop_grads.pt.trace.json.gz").launch
    assert r.remedies[0].startswith("run the model once on the whole batch"), r.remedies
    assert "torch.func.vmap, torch.func.grad" in r.remedies[0]


@pytest.mark.parametrize(("name", "op"), [("sample_loop_metric", "aten::unbind"), ("sample_loop_metric_indexed", "aten::select")])
def test_a_metric_read_into_python_sample_by_sample_is_one(name: str, op: str) -> None:
    """Accuracy counted per sample, ``int(p.argmax() == t)`` over ``zip(out, y)`` or ``out[i]``: no
    model per sample, but each of the 256 iterations reads a value into Python (aten::item). 1.76 ms a
    call against 0.81 ms on the whole tensor; the report read "CPU compute-bound", torch.compile first
    (which would break its graph at every .item())."""
    found = sample_loop(frame_of(load(DATA / f"{name}.pt.trace.json.gz")), None)
    assert found is not None and found.reads
    assert (found.op, found.walked, found.rows, found.iterations, found.product_rows) == (op, "256x10", 1, 256, 0)
    assert found.loop_share > 0.3 and found.share == found.loop_share
    r = api.report(DATA / f"{name}.pt.trace.json.gz").launch
    assert any("reading a value into Python (aten::item)" in e for e in r.evidence), r.evidence
    assert r.remedies[0].startswith("compute on the whole tensor and read the result into Python once"), r.remedies


def test_a_loop_reading_batch_wide_values_is_not() -> None:
    """A precision-recall curve, ``int((probs > t).sum())`` for 99 thresholds: an iteration per piece of
    a tensor that reads a value into Python, but each works on the whole batch."""
    assert sample_loop(frame_of(load(DATA / "sample_loop_thresholds.pt.trace.json.gz")), None) is None


@pytest.mark.parametrize(("path", "uncertain"), [
    ("cpu/sample_loop_metric.pt.trace.json.gz", True), ("cpu/sample_loop_thresholds.pt.trace.json.gz", True),
    ("cpu/sample_loop.pt.trace.json.gz", False),  # one loss.item() a step
    ("cpu/adamw_foreach.pt.trace.json.gz", False),  # AdamW's own reads of each parameter's step count
    ("cpu/lbfgs.pt.trace.json.gz", True),  # LBFGS's reads inside its step decide its line search: they stay
    ("h200/item_sync.pt.trace.json.gz", False)])  # 8 reads a step, ~90 ops between two
def test_compiling_a_step_cut_small_by_reads_into_python_is_not_ranked(path: str, uncertain: bool) -> None:
    """torch.compile breaks its graph at each .item(): where a step's reads leave only a few ops between
    two, no-dispatch's saving is uncertain and does not order the remedies."""
    from tracekit.analyze.whatif import whatif

    found = {s.name: s for s in whatif(load(DATA.parent / path)).scenarios}["no-dispatch"]
    assert found.uncertain == uncertain
    assert ("tensor values into Python" in found.assumptions) == uncertain


def test_batching_is_ranked_by_what_it_saves_not_by_the_loop_time() -> None:
    """A small CNN run on 32 images one at a time: the loop is 98% of the profiled step, but batched its
    convolutions' work stays (6.8-7.3 ms a call against 6.1-6.7 ms batched, 8-10%). What batching saves
    is the loop's dispatch and each op's fixed cost beyond one sample's, and the products' weight reads:
    about a quarter of the profiled step (the profiler inflates the dispatch of its 1,900 ops a step)."""
    found = sample_loop(frame_of(load(DATA / "sample_loop_cnn.pt.trace.json.gz")), None)
    assert found is not None and found.share > 0.9
    assert 0.1 < found.saving < 0.4
    r = api.report(DATA / "sample_loop_cnn.pt.trace.json.gz").launch
    ordered = next(e for e in r.evidence if e.startswith("remedies ordered by predicted saving"))
    assert f"products beyond one {found.saving:.0%} of the steps' time" in ordered, ordered


def test_a_jacobian_taken_row_by_row_is_told_to_vectorize() -> None:
    """tests/data/cpu/jacobian_rows: torch.autograd.functional.jacobian's default, one backward per output
    row after one forward. It was told to "run the model once on the whole batch"; vectorize=True took the
    Jacobian in 0.79 ms against 3.06 ms row by row."""
    r = api.report(DATA / "jacobian_rows.pt.trace.json.gz").launch
    assert r.sample_loop is not None and r.sample_loop.backward_each
    assert any(x.startswith("each iteration runs a backward pass: a Jacobian") and "vectorize=True" in x for x in r.remedies)
    # A loop training per sample runs its forward in each iteration: the batching remedy stays.
    per_sample = api.report(DATA / "sample_loop_grads.pt.trace.json.gz").launch
    assert per_sample.sample_loop is not None and not per_sample.sample_loop.backward_each


def test_a_batch_augmented_image_by_image_in_the_step_is_told_to_prepare_it_outside() -> None:
    """torchvision.transforms.v2 applied image by image inside a training step, then stacked
    (tests/data/cpu/make_sample_transforms.py): told as the batch prepared sample by sample, ranked first
    by its time (8.5 of 18.2 ms unprofiled); the same transforms on the batch tensor are not, nor is a
    per-sample loop that runs a model (the walks above)."""
    report = api.report(DATA / "sample_transforms.pt.trace.json.gz")
    found = report.launch.sample_transforms
    assert found is not None and found.walked == "32x3x96x96" and found.samples == 32 and found.stack == "aten::stack"
    assert "aten::_upsample_bilinear2d_aa" in found.names and 20 < found.ops < 200
    assert 0.4 < found.share < 0.8  # unbind to stack, of the profiled steps
    said = [e for e in report.launch.evidence if e.startswith("the step prepares its batch sample by sample")]
    assert len(said) == 1 and "aten::unbind of 32x3x96x96 into 32 samples" in said[0], report.launch.evidence
    assert report.launch.remedies[0].startswith("prepare the samples outside the step"), report.launch.remedies
    assert json.loads(api.render(report, "json"))["sample_transforms"]["samples"] == 32
    assert api.report(DATA / "sample_transforms_batched.pt.trace.json.gz").launch.sample_transforms is None
    for name in ("sample_loop", "sample_loop_zip", "sample_loop_metric"):
        assert api.report(DATA / f"{name}.pt.trace.json.gz").launch.sample_transforms is None


def test_an_uncertain_prediction_says_why_in_the_report() -> None:
    """LBFGS (tests/data/cpu/make_lbfgs.py) reads 700-1,100 values a step into Python inside its optimizer
    step: no-dispatch is not ranked, and the report says why beside its torch.compile remedy; AdamW's
    step gets no such line."""
    r = api.report(DATA / "lbfgs.pt.trace.json.gz").launch
    said = [e for e in r.evidence if e.startswith("what no-dispatch would save is not predicted: the step reads ")]
    assert len(said) == 1 and "torch.compile breaks its graph at each" in said[0], r.evidence
    assert any(x.startswith("cut per-op dispatch") for x in r.remedies)
    assert r.optimizer is None or "fused" not in (r.optimizer.remedy() or "")
    adamw = api.report(DATA / "adamw_foreach.pt.trace.json.gz").launch
    assert not [e for e in adamw.evidence if "not predicted" in e]
