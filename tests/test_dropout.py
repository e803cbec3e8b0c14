"""CPU training spent drawing dropout masks (tracekit/analyze/dropout.py). Real captures
(tests/data/cpu/make_dropout.py): a 4-layer nn.TransformerEncoder trained with dropout 0.1 and 0 on a
2-core AMD EPYC, where ATen draws each mask one element at a time (412-436 against 301-315 ms a step
unprofiled)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TRACES

import tracekit
from tracekit.analyze.dropout import dropout_masks
from tracekit.analyze.frame import frame_of
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def test_dropout_masks_drawn_one_element_at_a_time_are_told_with_their_cost() -> None:
    """Before: "CPU compute-bound" with aten::bernoulli_ the second op (25%) and nothing said of it."""
    path = DATA / "dropout_train_p01.pt.trace.json.gz"
    found = dropout_masks(frame_of(load(path)), None)
    assert found is not None
    # 16 dropout calls a step: per layer 3 (attention's, the two residual ones) and the FFN's, over 4 layers.
    assert found.calls == 16 and 0.2 <= found.share <= 0.4 and found.draw_share <= found.share, found
    # Elements from the recorded shapes: 4 layers x (2 x 16x128x256 + 16x128x1024 + 16x4x128x128).
    assert found.elements == 4 * (2 * 16 * 128 * 256 + 16 * 128 * 1024 + 16 * 4 * 128 * 128)
    assert found.serial and found.ns_per_element > 3, found
    launch = tracekit.report(path).launch
    said = next(e for e in launch.evidence if e.startswith("training spends"))
    assert "16 calls a step drawing a random mask" in said and "16.8M mask elements a step" in said, said
    fix = next(r for r in launch.remedies if r.startswith("dropout's masks cost"))
    # Serial on every CPU in released PyTorch (its MKL path is off: measured on an Intel Xeon too).
    assert "one element at a time, on one thread, on any CPU" in fix and "only on Intel" not in fix, fix
    assert "set it to 0" in fix, fix
    doc = json.loads(tracekit.render(tracekit.report(path), "json"))
    assert doc["dropout_masks"]["calls"] == 16


def test_no_dropout_and_no_training_are_not_told() -> None:
    assert dropout_masks(frame_of(load(DATA / "dropout_train_p0.pt.trace.json.gz")), None) is None
    # Inference in training mode draws masks too: train_mode's finding, not this one.
    assert dropout_masks(frame_of(load(DATA / "train_mode_encoder.pt.trace.json.gz")), None) is None


def test_evaluation_in_training_mode_stays_the_first_remedy() -> None:
    """train_mode_validation: the training steps draw masks (19% of their time) and the evaluation steps
    run in training mode; model.eval() (the scores vary from run to run) comes before the cost."""
    remedies = tracekit.report(DATA / "train_mode_validation.pt.trace.json.gz").launch.remedies
    assert remedies[0].startswith("call model.eval() before the evaluation batches")
    assert remedies[1].startswith("dropout's masks cost")


TF = Path(__file__).parent / "data" / "tf"


def test_keras_dropout_layers_are_told_with_their_cost() -> None:
    """tests/data/tf/make_keras_dropout.py: a 1-layer Keras encoder trained with dropout 0.1 (three
    dropout layers: attention's and two Dropout) and 0. Before: "CPU compute-bound" with
    StatelessRandomUniformV2 the third op type (9%) and nothing said of dropout."""
    path = TF / "keras_dropout_p01.xplane.pb"
    found = dropout_masks(frame_of(load(path)), None, "tf")
    assert found is not None and found.framework == "tf"
    assert found.calls == 3 and 0.1 <= found.share <= 0.3 and 0 < found.draw_share < found.share, found
    launch = tracekit.report(path).launch
    assert any(e.startswith("training spends") and "3 dropout layers a step" in e for e in launch.evidence)
    fix = next(r for r in launch.remedies if r.startswith("dropout's masks cost"))
    assert "keras.layers.Dropout(0.0)" in fix and "Intel" not in fix, fix
    assert dropout_masks(frame_of(load(TF / "keras_dropout_p0.xplane.pb")), None, "tf") is None
    assert "dropout_masks" not in tracekit.report(TF / "keras_dropout_p0.xplane.pb").launch.findings()


def test_tf_dropout_kernels_on_a_gpu_are_told_xla() -> None:
    """The xprof BERT sample (8 V100s, TF): dropout's Philox draws, compares, selects and scalings run as
    kernels of their own, 74% of the kernels' time in the two steps; the GPU-bound verdict's top kernels
    line names the draw first."""
    path = TRACES / "xprof" / "tf_bert_8xV100_gpu_multi_worker.xplane.pb"
    if not path.exists():
        pytest.skip(f"real traces not found: {path} is absent")
    launch = tracekit.report(path).launch
    found = launch.dropout_masks
    assert found is not None and found.on_gpu and found.framework == "tf"
    assert 0.7 <= found.share <= 0.8 and 0.2 <= found.draw_share <= 0.35, found
    assert any(e.startswith("top kernels by GPU time: tensorflow::functor::FillPhiloxRandomKernelLaunch") for e in
               launch.evidence), launch.evidence
    fix = next(r for r in launch.remedies if r.startswith("dropout's kernels take 74%"))
    assert "jit_compile=True" in fix and "not measured on a GPU here" in fix, fix


def test_a_gpu_bound_step_names_its_top_kernels_and_their_ops() -> None:
    """An H200 bf16 MLP: the GEMM's kernel and aten::mm that launched it; elementwise kernels by their op."""
    launch = tracekit.report(Path(__file__).parent / "data" / "h200" / "fp8_mlp_bf16.pt.trace.json.gz").launch
    assert launch.verdict == "GPU-bound"
    said = next(e for e in launch.evidence if e.startswith("top kernels by GPU time"))
    assert "(aten::mm) 88%" in said and "at::native::vectorized_elementwise_kernel (aten::clamp_min)" in said, said
