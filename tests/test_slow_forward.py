"""A TF layer's forward product far slower than its own gradient products (tracekit/analyze/slow_forward.py):
Keras's mixed_float16 on a CPU, read from real TF profiler captures (tests/data/tf/make_mixed_precision_fit.py)
beside every other stored TF capture, which has none."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracekit
from tracekit.analyze.classify import classify_rows
from tracekit.analyze.frame import frame_of
from tracekit.analyze.slow_forward import scope_path, slow_forward
from tracekit.ingest import load

TF = Path(__file__).parent / "data" / "tf"


def test_mixed_float16_on_a_cpu_is_told_by_its_slow_forward_products() -> None:
    """The MLP under mixed_float16 took 240 ms a batch against 3.9 in float32; the report said "CPU
    compute-bound ... look at the op breakdown" and nothing of why: the second layer's fused forward matmul
    takes 144 ms a call, some 600x each of the layer's gradient products (same arithmetic)."""
    launch = tracekit.report(TF / "mixed_float16_fit.xplane.pb").launch
    found = launch.slow_forward
    assert found is not None and found.float16 and found.layers == 2
    assert found.worst.endswith("dense_1_2/Relu:_MklNativeFusedMatMul") and found.ratio() > 100, found
    assert found.share > 0.9 and len(found.gradients) == 2
    assert any(x.startswith("train in float32 on this CPU, or under mixed_bfloat16") for x in launch.remedies)
    assert "slow_forward" in launch.findings()
    said = next(x for x in launch.evidence if "which do the same arithmetic" in x)
    assert "Keras's mixed_float16 policy" in said, said


@pytest.mark.parametrize("path", sorted(p.name for p in TF.glob("*.xplane.pb") if p.name != "mixed_float16_fit.xplane.pb"))
def test_other_tf_captures_have_no_slow_forward(path: str) -> None:
    """mixed_bfloat16 (4.3 ms a batch) and every float32 capture: none, though small first layers' fused
    forward ops take up to 8.3x their gradient products' median call (oneDNN's fixed cost per call)."""
    frame = frame_of(load(TF / path))
    assert slow_forward(frame, classify_rows(frame), None) is None


@pytest.mark.parametrize(("name", "path", "gradient"), [
    ("StatefulPartitionedCall/gradient_tape/sequential_1/dense_1_2/MatMul/MatMul:_MklMatMul",
     "sequential_1/dense_1_2/MatMul/MatMul", True),
    ("StatefulPartitionedCall/sequential_1/dense_1_2/Relu:_MklNativeFusedMatMul", "sequential_1/dense_1_2/Relu", False),
    ("training/Adam/gradients/dense/MatMul_grad/MatMul:MatMul", "dense/MatMul_grad/MatMul", True),
    ("model/my_gradients/dense/MatMul:MatMul", "model/my_gradients/dense/MatMul", False),
])
def testscope_paths(name: str, path: str, gradient: bool) -> None:
    """Function-call and gradient scopes dropped; a layer merely named like a gradient scope is not one."""
    assert scope_path(name) == (path, gradient)
