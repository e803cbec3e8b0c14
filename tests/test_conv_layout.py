"""CPU convolutions on NCHW tensors (tracekit.analyze.conv_layout), on real captures made by
tests/data/cpu/make_conv_layout.py: one CNN trained in NCHW and in channels_last."""

from __future__ import annotations

import json
from pathlib import Path

from tracekit import api
from tracekit.analyze.conv_layout import nchw_convolutions
from tracekit.analyze.frame import frame_of
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def test_a_cpu_cnn_in_nchw_is_told_channels_last() -> None:
    """56.1 ms a step in NCHW, 41.2 ms in channels_last; the report read "CPU compute-bound: look at the op
    breakdown" and nothing more."""
    found = nchw_convolutions(frame_of(load(DATA / "conv_nchw.pt.trace.json.gz")), None)
    assert found is not None and found.share > 0.3 and found.nchw_share == 1.0
    assert "strides [65536, 1024, 32, 1]" in found.example  # 64 channels of 32x32, NCHW
    r = api.report(DATA / "conv_nchw.pt.trace.json.gz").launch
    assert any(e.startswith("convolutions take") for e in r.evidence), r.evidence
    assert r.remedies[0].startswith("keep the model and its input in channels_last on this CPU"), r.remedies
    assert "data_format='channels_last'" in r.remedies[0]  # a Keras 3 model on the torch backend: its layers' setting
    doc = json.loads(api.render(api.report(DATA / "conv_nchw.pt.trace.json.gz"), "json"))
    assert doc["nchw_convolutions"]["nchw_share"] == 1.0


def test_the_same_cnn_in_channels_last_is_not() -> None:
    """Its convolutions' strides are channels_last's ([H*W*C, 1, W*C, C]): the same shapes, another layout."""
    assert nchw_convolutions(frame_of(load(DATA / "conv_channels_last.pt.trace.json.gz")), None) is None
    r = api.report(DATA / "conv_channels_last.pt.trace.json.gz").launch
    assert not any("channels_last" in x for x in r.remedies)


def test_group_norm_between_the_convolutions_hedges_the_remedy() -> None:
    """GroupNorm runs slower in channels_last on a CPU (a diffusers UNet gained nothing): the remedy says
    so, with GroupNorm's share, and asks for the step to be timed both ways; batch norms do not."""
    found = nchw_convolutions(frame_of(load(DATA / "conv_nchw_group_norm.pt.trace.json.gz")), None)
    assert found is not None and 0.01 < found.group_norm_share < 0.3, found
    assert f"this model also runs GroupNorm ({found.group_norm_share:.1%} of the step)" in found.remedy()
    assert "time the step both ways" in found.remedy()
    plain = nchw_convolutions(frame_of(load(DATA / "conv_nchw.pt.trace.json.gz")), None)
    assert plain is not None and plain.group_norm_share == 0 and "GroupNorm" not in plain.remedy()
