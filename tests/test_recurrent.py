"""Why a PyTorch LSTM layer ran per timestep on a CPU (tracekit.analyze.recurrent), on real captures
made by tests/data/cpu/make_lstm_per_timestep.py and make_recurrent_layers.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracekit import api
from tracekit.analyze.frame import frame_of
from tracekit.analyze.recurrent import FLOAT64, PACKED, PROJECTION, lstm_per_timestep_reasons
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"
H100 = Path(__file__).parent / "data" / "h100"


@pytest.mark.parametrize(("capture", "reasons"), [("lstm_packed", [PACKED]), ("lstm_float64", [FLOAT64]),
                                                  ("lstm_proj", [PROJECTION]), ("lstm_packed_no_shapes", [])])
def test_an_lstm_layer_run_per_timestep_on_a_cpu_says_why_and_how_to_fuse_it(capture: str, reasons: list[str]) -> None:
    """nn.LSTM on a CPU hands a layer to oneDNN only for a padded float32/bfloat16 batch without
    proj_size; otherwise aten::lstm loops over the timesteps itself (~30x the ops; a training step at
    h256 b16 t20 took 7.4 ms packed against 5.1 ms padded here). The style read "fused", so no remedy."""
    frame = frame_of(load(DATA / f"{capture}.pt.trace.json.gz"))
    assert lstm_per_timestep_reasons(frame) == reasons
    r = api.report(DATA / f"{capture}.pt.trace.json.gz").launch
    (said,) = [x for x in r.remedies if x.startswith("nn.LSTM runs here as PyTorch's own loop")]
    for reason in reasons:
        assert reason in said
    if not reasons:
        assert "record_shapes=True" in said


def test_a_fused_cpu_lstm_and_a_gpu_lstm_get_no_such_remedy() -> None:
    fused = frame_of(load(DATA / "lstm_layer.pt.trace.json.gz"))
    assert lstm_per_timestep_reasons(fused) is None
    r = api.report(DATA / "lstm_layer.pt.trace.json.gz").launch
    assert not any(x.startswith("nn.LSTM runs here") for x in r.remedies)
    (gpu,) = H100.glob("nn_lstm-cuda-*.pt.trace.json.gz")
    assert lstm_per_timestep_reasons(frame_of(load(gpu))) is None  # cuDNN takes packed, float64 and proj_size

