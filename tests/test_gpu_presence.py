"""What shows that a trace without GPU activity comes from a GPU program (tracekit.analyze.gpu_presence)."""

from __future__ import annotations

import json
from pathlib import Path

from tracekit import api as tracekit_api


def test_a_cpu_recurrent_layer_asking_whether_cudnn_applies_ran_on_the_cpu() -> None:
    """Every nn.LSTM/GRU/RNN call asks ``aten::cudnn_is_acceptable``, on a CPU too (torch 2.13), and
    the GPU-only-op rule took that for a cuDNN op: every CPU nn.LSTM trace read "undetermined:
    profile again with the GPU's activities on". cuDNN's working ops still show a GPU program."""
    from tracekit.analyze.gpu_presence import GPU_ONLY_OPS

    cpu = Path(__file__).parent / "data" / "cpu" / "lstm_layer.pt.trace.json.gz"
    doc = json.loads(tracekit_api.render(tracekit_api.report(cpu), "json"))
    assert doc["breakdown"]["unrecorded_gpu_work"] == ""
    assert doc["verdict"]["verdict"] == "CPU compute-bound", doc["verdict"]
    assert any(op["name"] == "aten::cudnn_is_acceptable" for op in doc["top_ops"])
    assert not GPU_ONLY_OPS.search("aten::cudnn_is_acceptable")
    assert all(GPU_ONLY_OPS.search(n) for n in ("aten::cudnn_convolution", "aten::_cudnn_rnn", "aten::cudnn_batch_norm",
                                                "aten::miopen_rnn", "CudnnRNNV3"))
