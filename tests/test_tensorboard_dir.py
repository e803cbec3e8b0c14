"""A torch.profiler TensorBoard log directory (tensorboard_trace_handler's output) is accepted as a trace."""

from __future__ import annotations

import pytest

import tracekit
from tracekit.cli import main
from tracekit.errors import InputError

torch = pytest.importorskip("torch")


def _capture(log_dir, cycles: int) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    lstm = torch.nn.LSTM(8, 8)
    x = torch.randn(4, 2, 8)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=0, active=1, repeat=cycles),
                 on_trace_ready=tensorboard_trace_handler(str(log_dir))) as prof:
        for _ in range(cycles):
            lstm(x)
            prof.step()


def test_a_log_directory_with_one_trace_is_that_trace(tmp_path, capsys):
    _capture(tmp_path / "tb", cycles=1)
    (trace,) = list((tmp_path / "tb").glob("*.pt.trace.json"))
    from_dir, from_file = tracekit.load(tmp_path / "tb"), tracekit.load(trace)
    assert from_dir.equals(from_file) and from_dir.schema.metadata == from_file.schema.metadata  # same trace id too
    assert main(["report", str(tmp_path / "tb"), "-f", "json"]) == 0


def test_a_log_directory_with_several_traces_says_so_and_lists_them(tmp_path):
    _capture(tmp_path / "tb", cycles=2)
    traces = sorted(p.name for p in (tmp_path / "tb").glob("*.pt.trace.json"))
    assert len(traces) == 2
    with pytest.raises(InputError) as e:
        tracekit.load(tmp_path / "tb")
    message = str(e.value)
    assert "holds 2 JSON traces" in message and traces[0] in message and "tracekit ingest" in message
