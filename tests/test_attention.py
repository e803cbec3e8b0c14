"""Attention computed op by op (tracekit.analyze.attention), on real captures made by
tests/data/cpu/make_attention.py."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from tracekit import api
from tracekit.analyze.attention import unfused_attention
from tracekit.analyze.frame import frame_of
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


@pytest.mark.parametrize(("name", "scores"), [("attention_unfused", "8x8x256x256"),
                                              ("attention_mha_weights", "64x512x512")])
def test_attention_computed_op_by_op_is_told_the_fused_op(name: str, scores: str) -> None:
    """11.1 ms op by op against 7.8 fused; nn.MultiheadAttention trained at T512 172 ms a step asking for
    the weights (its default), 101 ms without. The reports read "CPU compute-bound" with bmm and softmax
    at the top and nothing more."""
    found = unfused_attention(frame_of(load(DATA / f"{name}.pt.trace.json.gz")), None)
    assert found is not None and found.scores == scores and found.per_step == 1 and found.share >= 0.2
    r = api.report(DATA / f"{name}.pt.trace.json.gz").launch
    assert any(e.startswith("attention is computed op by op") for e in r.evidence), r.evidence
    assert r.remedies[0].startswith("compute attention with torch.nn.functional.scaled_dot_product_attention")
    doc = json.loads(api.render(api.report(DATA / f"{name}.pt.trace.json.gz"), "json"))
    assert doc["unfused_attention"]["scores"] == scores


@pytest.mark.parametrize("name", ["attention_mha_no_weights", "attention_mha_short"])
def test_the_fused_op_and_short_sequences_are_not(name: str) -> None:
    """need_weights=False runs the fused op (no softmax at the top level); at T128 the scores fit in cache
    and fusing gained nothing (12.8 ms either way)."""
    assert unfused_attention(frame_of(load(DATA / f"{name}.pt.trace.json.gz")), None) is None


def test_without_shapes_nothing_is_claimed() -> None:
    """A product, a softmax and a product with no shapes could be a classifier's head: not claimed."""
    table = load(DATA / "attention_unfused.pt.trace.json.gz")
    assert unfused_attention(frame_of(table.drop_columns(["args"])), None) is None


def test_sdpa_on_its_math_path_for_dropout_is_told() -> None:
    """tests/data/cpu/make_dropout.py: nn.TransformerEncoder trained with dropout 0.1 calls
    scaled_dot_product_attention with dropout_p=0.1, which on a CPU runs the math path
    (aten::_scaled_dot_product_attention_math: the scores, _safe_softmax, a dropout over them, two
    products) in each of its 4 layers; with dropout 0 the fused flash kernel. Before: only the masks'
    cost was said (the dropout finding), nothing of the attention left op by op."""
    from tracekit.analyze.attention import sdpa_math_path

    path = DATA / "dropout_train_p01.pt.trace.json.gz"
    found = sdpa_math_path(frame_of(load(path)), None)
    assert found is not None and found.per_step == 4 and found.query == "16x4x128x64", found
    assert 0.05 <= found.share < 0.3, found
    r = api.report(path).launch
    assert any(e.startswith("scaled_dot_product_attention runs its math path 4 times a step") for e in r.evidence)
    assert any(fix.startswith("attention's dropout keeps scaled_dot_product_attention off its fused kernel")
               for fix in r.remedies), r.remedies
    doc = json.loads(api.render(api.report(path), "json"))
    assert doc["sdpa_math_path"]["per_step"] == 4
    fused = DATA / "dropout_train_p0.pt.trace.json.gz"
    assert sdpa_math_path(frame_of(load(fused)), None) is None
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in set(load(fused).column("name").to_pylist())


def test_sdpa_math_path_in_inference_in_training_mode_is_left_to_model_eval() -> None:
    """train_mode_encoder: the same encoder run for inference left in training mode; model.eval() turns
    the dropout off and SDPA takes its fused kernel: that finding's remedy, not attention dropout's."""
    from tracekit.analyze.attention import sdpa_math_path

    path = DATA / "train_mode_encoder.pt.trace.json.gz"
    assert "aten::_scaled_dot_product_attention_math" in set(load(path).column("name").to_pylist())
    assert sdpa_math_path(frame_of(load(path)), None) is None
    assert api.report(path).launch.remedies[0].startswith("call model.eval() before inference")


def test_sdpa_math_path_with_a_mask_says_which_masks_keep_the_fused_kernel() -> None:
    """tests/data/cpu/make_sdpa_dropout.py: a boolean padding mask and dropout 0.1. Boolean, float and
    causal masks keep the fused kernel at dropout 0 (checked on torch 2.13), a mask that requires grad
    does not: the remedy says so where the calls take a mask, and not where they take none."""
    from tracekit.analyze.attention import sdpa_math_path

    found = sdpa_math_path(frame_of(load(DATA / "sdpa_dropout_masked.pt.trace.json.gz")), None)
    assert found is not None and found.masked and found.per_step == 2, found
    assert "a mask that requires grad (a learned attention bias)" in found.remedy()
    unmasked = sdpa_math_path(frame_of(load(DATA / "dropout_train_p01.pt.trace.json.gz")), None)
    assert unmasked is not None and not unmasked.masked and "requires grad" not in unmasked.remedy()


def test_unfused_attention_covers_no_more_than_the_step_on_a_jittered_clock(tmp_path: Path) -> None:
    """The real unfused-attention capture with a fifth of its timestamps moved by up to 5 µs (a
    clock's jitter; benchmarks/fuzz_analysis.py's mutation, seed 20261201): the instances' spans were
    summed, and the evidence said "130% of the step time in the forward alone" (99% unjittered).
    Now the time they cover inside the steps."""
    original = Path(__file__).parent / "data" / "cpu" / "attention_unfused.pt.trace.json.gz"
    doc = json.loads(gzip.decompress(original.read_bytes()))
    rnd = random.Random(f"20261201/{original.name}/jitter")
    doc["traceEvents"] = [dict(e, ts=e["ts"] + rnd.uniform(-5, 5)) if "ts" in e and rnd.random() < 0.2 else e
                          for e in doc["traceEvents"]]
    jittered = tmp_path / "jittered.json"
    jittered.write_text(json.dumps(doc))
    for path in (original, jittered):
        found = api.launch(path).result.unfused_attention
        assert found is not None and 0.9 < found.share <= 1.0, (path.name, found)
