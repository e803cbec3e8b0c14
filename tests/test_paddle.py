"""PaddlePaddle's profiler JSON (tracekit/ingest/paddle.py), on real paddle.profiler captures
(tests/data/paddle/make_profiles.py, Paddle 3.3.1, CPU). Before, such a file was read as a PyTorch
trace: "undetermined ... 100% of step time is outside any compute op" with every op name carrying
its own duration (``matmul dygraph[677.273 us]``), no step found (``ProfileStep#1[2.725 ms]``), the
ops on a thread apart from the steps, and "cut per-op dispatch: torch.compile or TorchScript"."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from conftest import assert_commands_read, ingested

import tracekit
from tracekit.analyze import launch as launch_module
from tracekit.analyze import verdicts
from tracekit.ingest import columns, detect, load
from tracekit.schema import source_of

DATA = Path(__file__).parent / "data" / "paddle"
MLP = DATA / "mlp_train.paddle_trace.json.gz"
SMALL_OPS = DATA / "small_ops_train.paddle_trace.json.gz"
RECORD_EVENT = DATA / "record_event_train.paddle_trace.json.gz"


def _rows(table: pa.Table, *names: str) -> dict[str, list[object]]:
    return {name: table.column(name).to_pylist() for name in names}


def test_the_profile_is_told_from_other_chrome_traces_by_its_content() -> None:
    assert {detect(p) for p in (MLP, SMALL_OPS, RECORD_EVENT)} == {"paddle-json-gz"}
    assert detect(Path(__file__).parent / "data" / "cpu" / "lstm_layer.pt.trace.json.gz") == "kineto-json-gz"


def test_names_lose_their_durations_and_each_threads_two_lanes_are_one() -> None:
    table = load(MLP)
    assert source_of(table) == "paddle"
    t = _rows(table, "kind", "name", "tid", "thread_name", "parent")
    names = [n for n in t["name"] if n]
    assert not any("ms]" in n or "us]" in n for n in names), [n for n in names if "]" in n][:3]
    assert [n for n, k in zip(t["name"], t["kind"], strict=True) if k == "step"] == [f"ProfileStep#{i}" for i in (1, 2, 3)]
    host = [i for i, k in enumerate(t["kind"]) if k in ("cpu_op", "user_range", "step")]
    assert len({t["tid"][i] for i in host}) == 1 and not any("(C++)" in (t["thread_name"][i] or "") for i in host)
    # An op run by a layer sits inside that layer's Forward range and the step, across the two lanes.
    op = t["name"].index("matmul dygraph")
    ancestors, at = [], t["parent"][op]
    while at is not None and at >= 0:
        ancestors.append(t["name"][at])
        at = t["parent"][at]
    assert "Linear" in ancestors and any(a.startswith("ProfileStep#") for a in ancestors), ancestors


def test_kernel_launches_carry_the_class_and_a_training_step_is_compute_bound() -> None:
    report = tracekit.report(MLP)
    assert report.launch.verdict == "CPU compute-bound"
    top = report.launch.top_ops.by_name
    classes = dict(zip(top.name, top.op_class, strict=True))
    assert classes["matmul kernel launch"] == "gemm" and classes["matmul_grad kernel launch"] == "gemm"
    assert classes["adam kernel launch"] == "elementwise" and classes["matmul dygraph"] == "other"
    assert len(report.launch.steps.steps) == 3


def test_small_ops_are_framework_bound_with_paddles_remedy() -> None:
    """60 ops of 16 elements at batch 1: dygraph's per-op work (infer_meta, grad-node creation) is most
    of the step; to_static was measured both ways (faster for inference, slower for training)."""
    launch = tracekit.report(SMALL_OPS).launch
    assert launch.verdict == "CPU/framework-bound"
    assert verdicts.PADDLE_STATIC_REMEDY in launch.remedies
    assert not any("torch.compile" in r or "TorchScript" in r for r in launch.remedies), launch.remedies


def test_a_capture_without_prof_step_takes_its_record_events_as_steps() -> None:
    """Without prof.step() Paddle writes one ProfileStep#0 over the whole capture; each iteration's
    RecordEvent("train_step") then marks the steps."""
    table = load(RECORD_EVENT)
    assert "calls of train_step" in columns.trace_extra(table)["steps_from"]
    assert len(tracekit.report(RECORD_EVENT).launch.steps.steps) == 3
    assert launch_module.PADDLE_NO_STEPS_HINT.startswith("no steps are marked")


def test_every_command_reads_it_and_the_parquet_keeps_what_it_is(tmp_path: Path) -> None:
    assert_commands_read(MLP)
    out = ingested(MLP, tmp_path / "mlp.parquet")
    assert source_of(load(out)) == "paddle" and tracekit.report(out).launch.verdict == "CPU compute-bound"


def test_paddle_dropout_in_training_is_told_with_its_cost() -> None:
    """tests/data/paddle: a 2-layer TransformerEncoder trained with dropout 0.1 at 256 tokens (929-995 ms a
    step unprofiled, 783-818 ms with dropout 0): its 8 dropout kernels a step are over a tenth of the
    profiled step. Before: nothing said (the dropout finding read PyTorch's and Keras's ops only)."""
    from tracekit.analyze.dropout import dropout_masks
    from tracekit.analyze.frame import frame_of

    found = dropout_masks(frame_of(load(DATA / "encoder_dropout_train.paddle_trace.json.gz")), None, "paddle")
    assert found is not None and found.framework == "paddle" and found.calls == 8 and found.share >= 0.1, found
    launch = tracekit.report(DATA / "encoder_dropout_train.paddle_trace.json.gz").launch
    assert any(fix.startswith("dropout's masks cost") and "paddle.nn.Dropout(p=0.0)" in fix for fix in launch.remedies)
    assert dropout_masks(frame_of(load(MLP)), None, "paddle") is None  # no dropout in it
