"""ONNX Runtime's profile JSON (tracekit/ingest/onnxruntime.py) and what its profiler adds to each node
(tracekit/analyze/onnxruntime_nodes.py). Real captures (tests/data/onnxruntime/make_profiles.py, ORT
1.32 on the CPU provider): a 4-node MLP at batch 32 (105 µs a run unprofiled, 137 profiled) and a
60-node model of 16-wide layers at batch 1 (27 µs unprofiled, 470 profiled). Before, such a file was
read as a Chrome trace of no framework: "undetermined: no framework ops"."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import assert_commands_read, ingested

import tracekit
from tracekit.analyze import verdicts
from tracekit.analyze.frame import frame_of
from tracekit.analyze.gpu_presence import onnxruntime_device_providers
from tracekit.analyze.onnxruntime_nodes import node_floor
from tracekit.errors import TraceContentError
from tracekit.ingest import columns, detect, load
from tracekit.schema import source_of

DATA = Path(__file__).parent / "data" / "onnxruntime"
MLP = DATA / "mlp.json"
SMALL_NODES = DATA / "small_nodes.json.gz"
RUNS = 30


def _column(table: pa.Table, name: str) -> list[object]:
    return table.column(name).to_pylist()


def test_the_profile_is_told_from_other_chrome_traces_by_its_content() -> None:
    assert detect(MLP) == "onnxruntime-json"
    assert detect(SMALL_NODES) == "onnxruntime-json-gz"
    assert detect(Path(__file__).parent / "data" / "cpu" / "lstm_layer.pt.trace.json.gz") == "kineto-json-gz"


def test_node_runs_are_ops_named_by_their_op_type_with_their_node_and_shapes() -> None:
    table = load(MLP)
    assert source_of(table) == "onnxruntime"
    kinds, names, categories = _column(table, "kind"), _column(table, "name"), _column(table, "category")
    ops = [i for i, k in enumerate(kinds) if k == "cpu_op"]
    assert {names[i] for i in ops} == {"Gemm", "Gelu", "LayerNormalization"}
    assert len(ops) == 4 * RUNS and all(categories[i] == "Node" for i in ops)
    ranges = {names[i] for i, k in enumerate(kinds) if k == "user_range"}
    assert {"SequentialExecutor::Execute", "session_initialization"} <= ranges
    # Each InferenceSession.run's range is a step (ORT marks none; the step inference finds them).
    assert [names[i] for i, k in enumerate(kinds) if k == "step"] == ["model_run"] * RUNS
    args = json.loads(table.column("args").combine_chunks().storage[ops[0]].as_py())
    # The exporter's node name and ORT's fields stay; the shapes are under Kineto's keys too.
    assert args["node"] == "/0/Gemm" and args["provider"] == "CPUExecutionProvider" and args["op_name"] == "Gemm"
    assert args["Input Dims"] == [[32, 256], [512]] and args["Input type"] == ["float", "float"]
    assert columns.trace_extra(table)["onnxruntime_providers"] == {"CPUExecutionProvider": 4 * RUNS}
    from tracekit.api import document  # the module itself: tracekit.api is set only once something imports it

    header = dict(document(tracekit.report(MLP)).facts)  # every report's header says them
    assert header["execution providers"] == f"CPUExecutionProvider ({4 * RUNS} node runs)"


def test_each_run_is_a_step_and_the_op_classes_are_known() -> None:
    report = tracekit.report(MLP)
    steps = report.launch.steps
    assert steps is not None and len(steps.steps) == RUNS
    assert "calls of model_run" in columns.trace_extra(report.table)["steps_from"]
    doc = json.loads(tracekit.render(report, "json"))
    by_name = {row["name"]: row for row in doc["top_ops_by_name"]}
    assert by_name["Gemm"]["op_class"] == "gemm" and by_name["LayerNormalization"]["op_class"] == "reduction"
    assert report.launch.verdict == "CPU compute-bound"


def test_the_profilers_cost_per_node_is_said_beside_a_verdict_it_does_not_decide() -> None:
    """The MLP's four nodes compute: the per-node floor (shortest run + shortest gap) times four is under
    half the step (40% in this capture, 22-40% in four), an upper bound on the 23% the profiler added
    there (137 against 105 µs)."""
    launch = tracekit.report(MLP).launch
    floor = launch.node_floor
    assert floor is not None and floor.nodes_per_step == 4
    assert 0.1 <= floor.share < verdicts.ORT_PROFILER_SHARE, floor
    said = next(e for e in launch.evidence if e.startswith("every node run of this ONNX Runtime profile"))
    assert "4 node runs a step" in said and "profiled" in said
    doc = json.loads(tracekit.render(tracekit.report(MLP), "json"))
    assert doc["onnxruntime_node_floor"]["node_runs_per_step"] == 4


def test_a_profile_of_small_nodes_is_not_judged_as_the_model() -> None:
    """60 nodes of 16-element work: 470 µs a run profiled, 27 µs unprofiled. Before: "CPU compute-bound"
    with FusedGemm, Mul and Add a fifth of the step each, and "cut per-op dispatch with the framework's
    compiler (torch.compile, tf.function(jit_compile=True), jax.jit)"."""
    launch = tracekit.report(SMALL_NODES).launch
    assert launch.verdict == "undetermined"
    said = next(e for e in launch.evidence if e.startswith("every node run of this ONNX Runtime profile"))
    assert "60 node runs a step" in said and "mostly ONNX Runtime's profiler" in said, said
    assert launch.remedies[:2] == [verdicts.ORT_UNPROFILED_REMEDY, verdicts.ORT_DISPATCH_REMEDY]
    assert not any("torch.compile" in r for r in launch.remedies)
    floor = node_floor(frame_of(load(SMALL_NODES)), None)
    assert floor is not None and floor.share >= verdicts.ORT_PROFILER_SHARE and floor.nodes_per_step == 60


def test_nodes_of_a_device_provider_are_host_calls_not_gpu_time() -> None:
    """ORT's profile of a CUDA (or TensorRT, ...) provider holds the same node events, timing the host's
    call that enqueues each node's kernels, and no GPU activity. No such capture can be made here: the
    real CPU profile's facts are given the provider instead (the node events are what the reader reads
    either way; the public CUDA profile in MQL5's ONNX documentation has this form)."""
    table = load(MLP)
    on_gpu = columns.with_extra(table, onnxruntime_providers={"CUDAExecutionProvider": 4 * RUNS})
    assert onnxruntime_device_providers(on_gpu) == {"CUDAExecutionProvider": 4 * RUNS}
    assert onnxruntime_device_providers(table) == {}
    launch = tracekit.report(on_gpu).launch
    assert launch.verdict == "undetermined"
    assert any("120 on CUDAExecutionProvider" in e for e in launch.evidence), launch.evidence
    assert launch.remedies == [verdicts.ORT_GPU_ACTIVITY_REMEDY]
    with pytest.raises(TraceContentError, match="no GPU activity"):
        tracekit.whatif(on_gpu)


def test_every_command_reads_it_and_the_parquet_keeps_what_it_is(tmp_path: Path) -> None:
    assert_commands_read(MLP)
    out = ingested(SMALL_NODES, tmp_path / "small_nodes.parquet")
    assert source_of(load(out)) == "onnxruntime"
    assert tracekit.report(out).launch.verdict == tracekit.report(SMALL_NODES).launch.verdict == "undetermined"


def test_a_session_profiled_without_a_run_says_so() -> None:
    """ORT profiles from the session's creation: its loading and initialization are there, and nothing else."""
    launch = tracekit.report(DATA / "no_runs.json").launch
    assert launch.verdict == "undetermined"
    assert any("without a node run" in e and "not run before end_profiling" in e for e in launch.evidence), launch.evidence


def test_whatif_says_its_no_dispatch_is_uncertain_on_an_onnxruntime_profile() -> None:
    """The small-node model's replay without dispatch predicts 46 µs (88%) for a step that runs 27 µs
    unprofiled: most of what it removes is the profiler's recording, no compiler's to remove."""
    scenarios = {s.name: s for s in tracekit.whatif(SMALL_NODES).result.scenarios}
    no_dispatch = scenarios["no-dispatch"]
    assert no_dispatch.uncertain and "profiler's own recording" in no_dispatch.assumptions


def test_a_transformer_export_reads_as_its_fused_ops() -> None:
    """tests/data/onnxruntime/bert_encoder: a 4-layer BERT encoder exported from Hugging Face, 8 runs,
    ORT's fusions applied. ONNX's Where (the attention mask's select) is elementwise, where TF's Where
    (the indices of true elements) stays a reduction."""
    from tracekit.analyze.classify import classify_op_name

    report = tracekit.report(DATA / "bert_encoder.json.gz")
    assert report.launch.verdict == "CPU compute-bound" and len(report.launch.steps.steps) == 8
    top = report.launch.top_ops.by_name
    classes = dict(zip(top.name, top.op_class, strict=True))
    assert classes["Gemm"] == classes["FusedMatMul"] == "gemm"
    assert classes["SkipLayerNormalization"] == classes["Softmax"] == "reduction"
    assert classes["Where"] == classes["Gelu"] == "elementwise"
    assert classify_op_name("encoder/mask/Where:Where") == "reduction"
    assert report.launch.node_floor is not None and report.launch.node_floor.share < 0.1  # large nodes: not said
    assert not any(e.startswith("every node run") for e in report.launch.evidence)
