"""Kineto: counts, exact timestamps and kernel -> launch -> op links checked against the raw JSON."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import TRACES, ids, needs_shared, shared_files

import tracekit

KINETO = shared_files("hta/**/*.json.gz")
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime"}


def raw_events(path):
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    return doc, doc["traceEvents"] if isinstance(doc, dict) else doc


@needs_shared
@pytest.mark.parametrize("path", KINETO, ids=ids(KINETO))
def test_counts_by_category_equal_the_raw_file(path):
    from tracekit.ingest.step_inference import INFERRED_CATEGORY

    _, events = raw_events(path)
    table = tracekit.load(path)
    raw = Counter(e.get("cat", "<none>") for e in events if e.get("ph") != "E")
    got = Counter(table["category"].to_pylist())
    got.pop(INFERRED_CATEGORY, None)  # step rows tracekit adds (a training loop's iterations): no event of the file
    assert got == raw
    kinds = Counter(table["kind"].to_pylist())
    assert kinds["gpu_kernel"] == sum(1 for e in events if str(e.get("cat", "")).lower() == "kernel")
    assert kinds["flow"] == sum(1 for e in events if e.get("ph") in ("s", "f", "t"))


@needs_shared
@pytest.mark.parametrize("path", KINETO, ids=ids(KINETO))
def test_timestamps_are_exact_nanoseconds(path):
    doc, events = raw_events(path)
    base = int(doc.get("baseTimeNanoseconds", 0)) if isinstance(doc, dict) else 0
    table = tracekit.load(path)
    starts = table["start_ns"].to_pylist()
    durs = table["dur_ns"].to_pylist()
    for i, e in enumerate(events):
        if "ts" in e:
            assert starts[i] == base + int((Decimal(e["ts"]) * 1000).to_integral_value()), i
        if "dur" in e and e.get("ph") == "X":
            assert durs[i] == int((Decimal(e["dur"]) * 1000).to_integral_value()), i


@needs_shared
@pytest.mark.parametrize("path", KINETO, ids=ids(KINETO))
def test_kernels_link_to_launch_and_op(path):
    """Every GPU activity whose correlation has a launch call in the raw file is linked to it, and to
    the cpu_op whose External id the launch carries."""
    _, events = raw_events(path)
    table = tracekit.load(path)
    launch_by_corr: dict[int, int] = {}
    for i, e in enumerate(events):
        args = e.get("args") or {}
        if str(e.get("cat", "")).lower() in LAUNCH_CATS and "correlation" in args:
            launch_by_corr.setdefault(int(args["correlation"]), i)
    op_by_ext = {}
    for i, e in enumerate(events):
        if e.get("cat") == "cpu_op" and "External id" in (e.get("args") or {}):
            op_by_ext.setdefault(int(e["args"]["External id"]), i)
    launch_row = table["launch_row"].to_pylist()
    op_row = table["op_row"].to_pylist()
    checked = 0
    for i, e in enumerate(events):
        args = e.get("args") or {}
        if str(e.get("cat", "")).lower() not in GPU_CATS or "correlation" not in args:
            continue
        launch = launch_by_corr.get(int(args["correlation"]))
        if launch is None:
            assert launch_row[i] is None
            continue
        assert launch_row[i] == launch
        ext = int((events[launch].get("args") or {}).get("External id", 0))
        if ext > 0 and ext in op_by_ext:
            assert op_row[i] == op_by_ext[ext]
        checked += 1
    if any(str(e.get("cat", "")).lower() == "kernel" for e in events) and launch_by_corr:
        assert checked > 0


@needs_shared
def test_old_category_names_and_string_pids():
    table = tracekit.load(TRACES / "hta" / "trace_file_list" / "inference_rank_1.json.gz")
    kinds = Counter(table["kind"].to_pylist())
    assert kinds["gpu_kernel"] == 4 and kinds["runtime_api"] == 8
    assert tracekit.info(table).launch_link_rate == 1.0
    spans = table.filter(pc.equal(pc.cast(table["kind"], pa.string()), "trace_span"))
    assert spans["pid"].to_pylist() == [None] and spans["process_name"].to_pylist() == ["Spans"]


@needs_shared
def test_gzip_and_plain_json_give_the_same_table(tmp_path):
    src = TRACES / "hta" / "critical_path" / "alexnet" / "benchmark_result_2869224_1695835535_trace.json.gz"
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress(src.read_bytes()))
    a, b = tracekit.load(src), tracekit.load(plain)
    assert a.drop_columns(["trace_id"]).equals(b.drop_columns(["trace_id"]))


# Intel GPU traces (Kineto with PTI) differ from CUDA ones in the host API's category and names:
# "xpu_runtime" calls named for SYCL's Unified Runtime, with the kernel's correlation id as CUPTI's
# (Intel's PTI docs show {"cat": "xpu_runtime", "name": "urEnqueueKernelLaunch", "args":
# {"External id": 5, "correlation": 4131}}). No XPU runs here, so a real H100 capture is renamed so.
XPU_NAMES = {"cudaLaunchKernel": "urEnqueueKernelLaunch", "cudaLaunchKernelExC": "urEnqueueKernelLaunch",
             "cudaDeviceSynchronize": "urQueueFinish"}


def test_intel_gpu_runtime_calls_launch_and_link_their_kernels(tmp_path):
    src = Path(__file__).parent / "data" / "h100" / "custom_eager-cuda-fp32-b16-h256-i256-l1-t10.pt.trace.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    for event in doc["traceEvents"]:
        if event.get("cat") == "cuda_runtime":
            event["cat"], event["name"] = "xpu_runtime", XPU_NAMES[event["name"]]
    xpu = tmp_path / "xpu.pt.trace.json"
    xpu.write_text(json.dumps(doc))
    cuda_table, xpu_table = tracekit.load(src), tracekit.load(xpu)
    assert Counter(xpu_table["kind"].to_pylist()) == Counter(cuda_table["kind"].to_pylist())
    assert tracekit.info(xpu_table).launch_link_rate == tracekit.info(cuda_table).launch_link_rate == 1.0
    cuda, intel = tracekit.launch(cuda_table), tracekit.launch(xpu_table)
    assert intel.result.launch_api.count == cuda.result.launch_api.count == 489
    assert intel.result.verdict == cuda.result.verdict == "CPU/framework-bound"
    # No remedy names CUDA's APIs for an Intel GPU.
    assert not any("CUDA" in r or "reduce-overhead" in r for r in intel.result.remedies)
    assert any("reduce-overhead" in r for r in cuda.result.remedies)


def test_launch_bound_remedies_name_the_devices_graph_api():
    from tracekit.analyze.verdicts import Evidence, judge

    def remedies(intel: bool) -> list[str]:
        e = Evidence(source="torch", has_ops=True, has_gpu=True, intel_gpu=intel, idle_share=0.9, kernels=10,
                     launch_p50_ns=5_000, kernel_p50_ns=2_000, gap_launching_share=0.5, gap_dispatch_share=0.3)
        verdict, _, out = judge(e)
        assert verdict == "launch-bound"
        return out

    assert any("torch.xpu.graph" in r for r in remedies(True)) and not any("CUDA" in r for r in remedies(True))
    assert any("CUDA graph" in r for r in remedies(False))


def test_begin_end_pairs_become_one_event(tmp_path):
    # Chrome B/E events (hand-written traces, old tools): one row with the duration, E rows removed.
    doc = {"traceEvents": [
        {"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": 10.0},
        {"ph": "B", "name": "inner", "pid": 1, "tid": 1, "ts": 11.5},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 12.0},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 20.25},
        {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 13, "dur": 1},
    ]}
    path = tmp_path / "be.json"
    path.write_text(json.dumps(doc))
    t = tracekit.load(path)
    assert t["name"].to_pylist() == ["outer", "inner", "op"]
    assert t["dur_ns"].to_pylist() == [10250, 500, 1000]
    assert t["parent"].to_pylist() == [None, 0, 0]


@needs_shared
def test_profiler_steps_written_as_operators_by_torch_1_9_are_steps(tmp_path):
    """torch <= 1.9 wrote ProfilerStep#N with cat "Operator" (torch >= 1.10: user_annotation). No such
    trace can be made here, so a real trace is rewritten in that one respect; steps must be the same."""
    src = TRACES / "hta" / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    for event in doc["traceEvents"]:
        if str(event.get("name", "")).startswith("ProfilerStep#") and event.get("cat") == "user_annotation":
            event["cat"] = "Operator"
    old = tmp_path / "torch19.json"
    old.write_text(json.dumps(doc))
    new_info, old_info = tracekit.info(tracekit.load(src)), tracekit.info(tracekit.load(old))
    assert old_info.steps == new_info.steps and len(new_info.steps) == 5
    steps = tracekit.load(old)["step"].to_pylist()
    assert steps == tracekit.load(src)["step"].to_pylist()


@needs_shared
def test_devices_listed_as_compute_properties_by_torch_1_8_are_read(tmp_path):
    """PyTorch 1.8-1.9's Kineto named the device list "computeProperties" (later "deviceProperties").
    A real trace rewritten in that one key must list the same GPUs."""
    src = TRACES / "hta" / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    assert doc.get("deviceProperties")
    doc["computeProperties"] = doc.pop("deviceProperties")
    old = tmp_path / "torch18.json"
    old.write_text(json.dumps(doc))
    new_info, old_info = tracekit.info(tracekit.load(src)), tracekit.info(tracekit.load(old))
    assert old_info.devices == new_info.devices and old_info.devices


@needs_shared
def test_windowed_ingest_without_the_c_scanner_reads_the_whole_file(tmp_path, monkeypatch):
    # No compiler at install time: `--window-mb` still writes the same Parquet file, in one piece.
    from tracekit.ingest import kineto_windows, parquet

    src = TRACES / "hta" / "critical_path" / "alexnet" / "benchmark_result_2869224_1695835535_trace.json.gz"
    monkeypatch.setattr(kineto_windows, "available", lambda: False)
    out = tmp_path / "w.parquet"
    assert kineto_windows.write_parquet(src, out, window_bytes=4096, gz=True) == tracekit.load(src).num_rows
    assert parquet.read(out).equals(tracekit.load(src))


def test_a_chrome_trace_no_framework_wrote_is_not_taken_for_pytorch(tmp_path):
    """viztracer writes the same trace-event JSON as Kineto, with no Kineto key at its top level and
    no event in a Kineto category. It was labelled a torch trace and told how to mark steps with
    torch.profiler; it is "chrome" now, with no framework's advice. A real viztracer run."""
    import subprocess
    import sys

    script = tmp_path / "loop.py"
    script.write_text("import time\nfor _ in range(3):\n    sum(i * i for i in range(20000))\n    time.sleep(0.001)\n")
    out = tmp_path / "viztracer.json"
    subprocess.run([sys.executable, "-m", "viztracer", "--quiet", "-o", str(out), str(script)], check=True,
                   capture_output=True, cwd=tmp_path)
    from tracekit import schema

    table = tracekit.load(out)
    assert table.schema.metadata[schema.META_SOURCE.encode()] == b"chrome"
    assert set(table.column("source").to_pylist()) == {"chrome"}
    r = tracekit.launch(out).result
    assert r.verdict == "undetermined" and not any("torch.profiler(" in e for e in r.evidence), r.evidence
    # It says what the trace is, not "was the profiler attached to the work".
    assert any("a Chrome trace from another tool" in e for e in r.evidence), r.evidence


def test_op_names_are_read_without_their_overload():
    """tests/data/cpu/make_overload_names.py: one training loop captured with torch.profiler's
    capture_overload_names on (aten::div.Tensor, aten::lerp_.Scalar, aten::sum.IntList_out) and off.
    With them the report found "ops tracekit has no class for" and no verdict; read without them, the
    two captures hold the same op names and the same verdict."""
    data = Path(__file__).parent / "data" / "cpu"
    with_overloads = tracekit.load(data / "overload_names.pt.trace.json.gz")
    without = tracekit.load(data / "overload_names_off.pt.trace.json.gz")
    ops = [set(pc.unique(t.filter(pc.equal(pc.cast(t.column("kind"), pa.string()), "cpu_op")).column("name")
                         .combine_chunks().dictionary_decode()).to_pylist()) for t in (with_overloads, without)]
    assert "aten::div" in ops[0] and "aten::lerp_" in ops[0] and not any("." in n for n in ops[0])
    assert ops[0] == ops[1]
    raw = raw_events(data / "overload_names.pt.trace.json.gz")[1]
    assert any(e.get("name") == "aten::div.Tensor" for e in raw)  # the file does name the overloads
    reports = [tracekit.report(data / f"{name}.pt.trace.json.gz").launch for name in ("overload_names", "overload_names_off")]
    assert reports[0].verdict == reports[1].verdict == "CPU compute-bound"
    assert not any("no class for" in e for e in reports[0].evidence)
