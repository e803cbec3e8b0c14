"""xprof's trace-viewer JSON is read as the XSpace it was converted from: the same steps, verdicts,
top ops, launch links, critical path and what-if as the ``.xplane.pb`` itself. The JSON files are
real: the shared one written by xprof 2.24.2, the others converted here by the installed xprof."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import TRACES, needs_shared

import tracekit
from tracekit.cli import main
from tracekit.errors import InputError
from tracekit.ingest import detect, load

HERE = Path(__file__).parent
TF_CPU = TRACES / "xprof" / "cpu_tf2.21"
BERT = TRACES / "xprof" / "tf_bert_8xV100_gpu_multi_worker.xplane.pb"
JAX = HERE / "data" / "jax" / "scan_rnn.xplane.pb"


def convert(xspace: Path, out: Path) -> Path:
    """The trace-viewer JSON xprof makes of an XSpace file (TensorBoard's Trace Viewer data)."""
    r2t = pytest.importorskip("xprof.convert.raw_to_tool_data", reason="xprof is not installed (pip install -e '.[tf-trace]')")
    data, _ = r2t.xspace_to_tool_data([str(xspace)], "trace_viewer", {})
    with gzip.open(out, "wt") as f:
        f.write(data if isinstance(data, str) else data.decode())
    return out


def _relative(doc):
    """A document without its absolute times: the converter drops the capture's start (the Task
    Environment plane), so the JSON's times count from the capture."""
    if isinstance(doc, dict):
        return {k: _relative(v) for k, v in doc.items() if k not in ("start_ns", "end_ns")}
    if isinstance(doc, list):
        return [_relative(v) for v in doc]
    return doc


def same_documents(a: Path, b: Path, command: str, tmp_path: Path) -> None:
    docs = []
    for i, trace in enumerate((a, b)):
        out = tmp_path / f"{command}-{i}.json"
        assert main([command, str(trace), "-f", "json", "-o", str(out)]) == 0
        doc = json.loads(out.read_text())
        doc.pop("title")
        docs.append(_relative(doc))
    assert docs[0] == docs[1]


@needs_shared
@pytest.mark.parametrize("command", ["report", "launch", "critical-path", "whatif"])
def test_the_shared_trace_viewer_json_reads_as_its_xspace(command: str, tmp_path: Path) -> None:
    same_documents(TF_CPU / "lstm_keras_bf16_fn.xplane.pb", TF_CPU / "lstm_keras_bf16_fn.trace_viewer.json.gz",
                   command, tmp_path)


@needs_shared
def test_the_table_holds_the_xspace_rows_the_converter_kept() -> None:
    a = load(TF_CPU / "lstm_keras_bf16_fn.xplane.pb")
    b = load(TF_CPU / "lstm_keras_bf16_fn.trace_viewer.json.gz")
    assert b.schema.metadata[b"tracekit.source"] == b"tf"
    assert b.schema.metadata[b"tracekit.source_format"] == b"xprof-json-gz"

    def rows(t, kinds):
        keep = [k in kinds for k in t.column("kind").to_pylist()]
        picked = t.filter(keep).select(["kind", "name", "thread_name", "start_ns", "dur_ns", "step"])
        return sorted(map(tuple, (picked.to_pandas().astype(str).values.tolist())))

    kinds = {"cpu_op", "step", "user_range", "python_function"}
    # The converter drops the Task Environment plane: times are relative to the capture there.
    a_rows, b_rows = rows(a, kinds), rows(b, kinds)
    assert len(a_rows) == len(b_rows) > 1000
    shift = min(int(r[3]) for r in a_rows) - min(int(r[3]) for r in b_rows)
    moved = sorted((k, n, th, str(int(s) - shift), d, st) for k, n, th, s, d, st in a_rows)
    assert moved == b_rows


@needs_shared
@pytest.mark.parametrize("command", ["report", "launch", "critical-path"])
def test_a_gpu_trace_converted_by_xprof_reads_as_its_xspace(command: str, tmp_path: Path) -> None:
    """The BERT GPU capture: kernels on device planes, launches with correlation ids on host lines."""
    json_trace = convert(BERT, tmp_path / "bert.trace_viewer.json.gz")
    same_documents(BERT, json_trace, command, tmp_path)
    launch = tracekit.launch(json_trace).result
    assert launch.verdict == "GPU-bound"


def test_a_jax_trace_converted_by_xprof_reads_as_jax(tmp_path: Path) -> None:
    """As JAX leaves them, the JSON beside its XSpace: the HLO modules (which say that ``ynn_fusion``
    is a matrix product) are read from the XSpace; without it, XLA's instructions go by their names."""
    json_trace = convert(JAX, tmp_path / "vm.trace.json.gz")
    alone = load(json_trace)
    shutil.copy(JAX, tmp_path / "vm.xplane.pb")
    same_documents(tmp_path / "vm.xplane.pb", json_trace, "report", tmp_path)
    assert load(json_trace).schema.metadata[b"tracekit.source"] == b"jax"
    classes = {op.name: op.op_class for op in tracekit.report(json_trace).launch.top_ops.ops.itertuples()}
    assert classes["ynn_fusion"] == "gemm"
    classes = {op.name: op.op_class for op in tracekit.report(alone).launch.top_ops.ops.itertuples()}
    assert classes["ynn_fusion"] == "elementwise"


def test_only_the_xspace_a_json_was_converted_from_gives_its_modules(tmp_path: Path) -> None:
    """``<host>.xplane.pb`` beside ``<host>.trace.json.gz`` (or the run directory's only XSpace beside
    JAX's ``perfetto_trace.json.gz``); never another XSpace that happens to be in the directory."""
    from tracekit.ingest.columns import trace_extra

    run = HERE / "data" / "jax" / "tanh_steps"
    for name in ("vm.trace.json.gz", "perfetto_trace.json.gz"):
        extra = trace_extra(load(run / name))
        assert extra["hlo_modules_from"] == "vm.xplane.pb" and "jit_f#10" in extra["hlo_classes"]
    other = tmp_path / "t.trace_viewer.json.gz"
    shutil.copy(run / "vm.trace.json.gz", other)
    shutil.copy(run / "vm.xplane.pb", tmp_path / "vm.xplane.pb")
    assert "hlo_classes" not in trace_extra(load(other))


def test_a_tf22_run_directory_with_one_trace_json_is_that_trace(tmp_path: Path) -> None:
    """TF 2.2 wrote plugins/profile/<run>/<host>.trace.json.gz (no XSpace): the directory reads as it."""
    run = tmp_path / "logs" / "plugins" / "profile" / "2020_06_01_10_00_00"
    run.mkdir(parents=True)
    convert(JAX, run / "worker0.trace.json.gz")
    assert detect(run / "worker0.trace.json.gz") == "xprof-json-gz"
    assert load(tmp_path / "logs").num_rows == load(run / "worker0.trace.json.gz").num_rows


def test_plain_json_and_bad_input(tmp_path: Path, capsys) -> None:
    gz = convert(JAX, tmp_path / "t.trace_viewer.json.gz")
    plain = tmp_path / "t.json"
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    assert detect(plain) == "xprof-json"
    assert load(plain).num_rows == load(gz).num_rows
    truncated = tmp_path / "cut.json"
    truncated.write_bytes(plain.read_bytes()[: plain.stat().st_size // 2])
    with pytest.raises(InputError, match="invalid trace JSON"):
        load(truncated)
    doc = json.loads(plain.read_text())
    timed = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("ph") == "X")
    doc["traceEvents"][timed]["ts"] = 1e300
    far = tmp_path / "far.json"
    far.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=f"event {timed} .*'ts' is 1e\\+300, not a time"):
        load(far)
    empty = tmp_path / "empty.json"
    doc = json.loads(plain.read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    empty.write_text(json.dumps(doc))
    out = tmp_path / "out"
    out.mkdir()
    assert main(["report", str(empty), "-o", str(out / "r.html")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "without any event" in err and str(empty) in err
    assert list(out.iterdir()) == []
    shutil.rmtree(out)


@pytest.mark.parametrize("name", ["vm.trace.json.gz", "perfetto_trace.json.gz"])
@pytest.mark.parametrize("command", ["report", "launch", "critical-path", "whatif"])
def test_jax_json_traces_read_as_the_xspace_beside_them(name: str, command: str, tmp_path: Path) -> None:
    """jax.profiler.trace(create_perfetto_trace=True) leaves the XSpace, xprof's trace-viewer JSON and
    a Perfetto copy of it (whose header lacks "highres-ticks") in one run directory."""
    run = HERE / "data" / "jax" / "tanh_steps"
    assert detect(run / name) == "xprof-json-gz"
    same_documents(run / "vm.xplane.pb", run / name, command, tmp_path)
    assert tracekit.launch(run / name).result.steps.steps.step.tolist() == [0, 1, 2]
