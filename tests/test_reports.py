"""Report commands and renderers: formats, -o/--force, determinism, escaping, compare --fail-if,
and the HTML page in headless Chromium."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from conftest import TRACES, needs_shared

import tracekit
from tracekit import api
from tracekit.cli import main
from tracekit.render.json_report import REPORT_SCHEMA_VERSION

NVFUSER = TRACES / "nsys" / "nvfuser_launch1000_v100_nsys2023.4.sqlite"
NS_TRACE = TRACES / "hta" / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
BASE = TRACES / "hta" / "trace_compare" / "base" / "base.json.gz"
TEST = TRACES / "hta" / "trace_compare" / "test" / "test.json.gz"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@needs_shared
@pytest.mark.parametrize("command", ["report", "launch", "ranges"])
@pytest.mark.parametrize(("suffix", "check"), [(".md", "# tracekit"), (".json", '"report_schema_version"'),
                                                (".html", "<!DOCTYPE html>"), (".txt", "tracekit")])
def test_format_from_extension_and_refuse_overwrite(command, suffix, check, tmp_path, capsys):
    out = tmp_path / f"r{suffix}"
    assert main([command, str(NVFUSER), "-o", str(out)]) == 0
    assert check in out.read_text()
    before = out.read_bytes()
    assert main([command, str(NVFUSER), "-o", str(out)]) == 1
    assert "exists; use --force" in capsys.readouterr().err
    assert out.read_bytes() == before
    assert main([command, str(NVFUSER), "-o", str(out), "--force"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temp files left


@pytest.mark.parametrize("command", [["report"], ["launch"], ["ranges"], ["critical-path"], ["whatif"],
                                     ["compare", "{trace}"], ["ingest"]])
def test_an_output_that_exists_is_refused_before_the_trace_is_read(command, tmp_path, capsys):
    """Forgetting --force was learnt only after the whole analysis (5 s on a 5M-event trace); now at
    once: the trace here is not even valid, and the error names the output."""
    trace = tmp_path / "broken.json"
    trace.write_text('{"traceEvents": [')
    out = tmp_path / ("r.parquet" if command == ["ingest"] else "r.json")
    out.write_text("keep me")
    argv = [command[0], str(trace), *[a.format(trace=trace) for a in command[1:]], "-o", str(out)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert str(out) in err and "exists" in err and "broken.json" not in err, err
    assert out.read_text() == "keep me"


def test_the_registry_names_each_renderer_as_it_names_itself():
    from tracekit.render import RENDERERS, renderer

    for name, (_, _, extension) in RENDERERS.items():
        made = renderer(name)
        assert (made.name, made.extension) == (name, extension)


@needs_shared
def test_a_json_report_imports_no_other_renderer():
    """-f json in CI must not pay for rich (the terminal renderer) or the HTML page."""
    code = ("import sys; from tracekit import api; api.render(api.report(sys.argv[1]), 'json'); "
            "print(sorted(m for m in sys.modules if m.startswith(('rich', 'tracekit.render.'))))")
    out = subprocess.run([sys.executable, "-c", code, str(NS_TRACE)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["['tracekit.render.document',", "'tracekit.render.documents',",
                                  "'tracekit.render.json_report']"]


@needs_shared
def test_reading_a_kineto_trace_does_not_import_the_xspace_reader():
    """Sniffing a JSON trace (is it xprof's trace viewer?) must not pull in protobuf."""
    code = ("import sys; from tracekit.ingest import load; load(sys.argv[1]); "
            "print(sorted(m for m in sys.modules if m in ('tracekit.ingest.xplane', 'google.protobuf')))")
    out = subprocess.run([sys.executable, "-c", code, str(NS_TRACE)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@needs_shared
def test_html_is_deterministic_and_self_contained(tmp_path):
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    assert main(["report", str(NS_TRACE), "-o", str(a)]) == 0
    assert main(["report", str(NS_TRACE), "-o", str(b)]) == 0
    text = a.read_text()
    assert a.read_bytes() == b.read_bytes()
    for needle in ("http://", "https://", "src=", "@import", "url("):
        assert needle not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<svg" in text and "tracekit-data" in text


@needs_shared
def test_json_report_has_schema_version_and_units(tmp_path):
    out = tmp_path / "r.json"
    assert main(["report", str(NS_TRACE), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["report_schema_version"] == REPORT_SCHEMA_VERSION
    gpu = doc["breakdown"]["gpu"]
    assert all(k.endswith(("_ns", "_id")) or k in ("step", "activities") for k in gpu[0])
    assert doc["verdict"]["verdict"] == "GPU-bound"


@needs_shared
def test_json_report_holds_the_same_data_as_the_standard_encoder_one_record_per_line():
    """The renderer writes records with the C encoder, one per line; the data is what
    json.dumps(indent=1) wrote before, NaN, infinity and numpy scalars included."""
    import numpy as np

    from tracekit.render.document import Document
    from tracekit.render.json_report import JsonRenderer, _clean

    doc = api.document(api.ranges(NVFUSER))
    text = JsonRenderer().render(doc)
    data = json.loads(text)
    expected = json.loads(json.dumps({"report_schema_version": REPORT_SCHEMA_VERSION, "report": doc.kind,
                                      "title": doc.title, **_clean(doc.data)}, indent=1))
    assert data == expected and len(data["instances"]) > 20_000
    lines = text.splitlines()
    assert sum(line.startswith("  {") for line in lines) >= len(data["instances"])
    odd = Document("odd", "report", [], [], {"rows": [{"a": np.int64(3), "b": np.float32(0.5), "c": float("nan")}],
                                             "top": {"x": float("inf"), "y": [np.bool_(True)]}, "empty": []})
    assert json.loads(JsonRenderer().render(odd)) == {"report_schema_version": REPORT_SCHEMA_VERSION, "report": "report",
                                                      "title": "odd", "rows": [{"a": 3, "b": 0.5, "c": None}],
                                                      "top": {"x": None, "y": [True]}, "empty": []}


@needs_shared
def test_terminal_and_markdown_show_kernel_names_verbatim():
    """Kernel names are full of brackets that rich would read as markup and Markdown as HTML."""
    from tracekit.render.document import Column, Document, Section, Table
    from tracekit.render.markdown_report import MarkdownRenderer
    from tracekit.render.terminal_report import TerminalRenderer

    names = api.launch(NVFUSER).result.pairs.kernel_name.astype(str)
    name = next(n for n in names.unique() if "[lambda" in n)
    doc = Document("t", "test", [], [Section("s", tables=[Table("", [Column("kernel"), Column("n", "count")], [[name, 1234567]])])], {})
    text = TerminalRenderer(width=len(name) + 40).render(doc)
    assert name in text
    assert "1,234,567" in text
    md = MarkdownRenderer().render(doc)
    assert name.replace("<", "&lt;").replace("|", "\\|") in md


def test_markdown_keeps_arrows_and_never_opens_a_blockquote_or_a_tag():
    """Only ``<`` needs escaping to keep HTML out; ``>`` stays readable in the raw file, except at the
    start of a line, where it would open a blockquote."""
    from tracekit.render.document import Column, Document, Section, Table
    from tracekit.render.markdown_report import MarkdownRenderer

    doc = Document("t", "test", [], [Section("s", sentences=["launch -> start: 5 > 3", "> 85% of time in GEMM"],
                                             tables=[Table("", [Column("name")], [["<script>x</script>"]],
                                                           note=" > a note")])], {})
    md = MarkdownRenderer().render(doc)
    assert "launch -> start: 5 > 3" in md
    assert "&lt;script>x&lt;/script>" in md and "<script" not in md
    lines = md.splitlines()
    assert "\\> 85% of time in GEMM  " in lines and " \\> a note" in lines
    assert not any(line.lstrip().startswith(">") for line in lines)


@needs_shared
def test_compare_fail_if_sets_exit_code(tmp_path, capsys):
    argv = ["compare", str(BASE), str(TEST), "--label", "base", "--label", "test", "-f", "json"]
    assert main([*argv, "--fail-if", "kernel_count > +1000"]) == 0
    capsys.readouterr()
    assert main([*argv, "--fail-if", "kernel_count < +1000", "--fail-if", "total_time > +1000%"]) == 3
    doc = json.loads(capsys.readouterr().out)
    assert doc["failed"] is True
    assert [c["failed"] for c in doc["checks"]] == [True, False]
    assert main([*argv, "--fail-if", "total_time >> 5"]) == 2
    assert "expected METRIC OP THRESHOLD" in capsys.readouterr().err
    assert main([*argv, "--fail-if", "no_such_metric > 5%"]) == 2


@needs_shared
def test_fail_if_unsigned_thresholds_are_absolute_signed_ones_are_deltas(capsys):
    metrics = api.compare([BASE, TEST], labels=["base", "test"]).result.metrics.set_index("metric")
    # Per-step medians: counts may end in .5.
    base_count, test_count = float(metrics.loc["kernel_count", "base"]), float(metrics.loc["kernel_count", "test"])
    argv = ["compare", str(BASE), str(TEST), "--label", "base", "--label", "test", "-f", "json"]
    # Unsigned: the value itself.
    assert main([*argv, "--fail-if", f"kernel_count >= {test_count}"]) == 3
    assert main([*argv, "--fail-if", f"kernel_count > {test_count}"]) == 0
    # Signed: the change against the baseline.
    change = test_count - base_count
    assert main([*argv, "--fail-if", f"kernel_count <= {change:+}"]) == 3
    assert main([*argv, "--fail-if", f"kernel_count < {change:+}"]) == 0
    capsys.readouterr()
    # A relative threshold on a metric the baseline does not have is a one-line usage error, not a traceback.
    zero = next(m for m in metrics.index if metrics.loc[m, "base"] == 0)
    assert main([*argv, "--fail-if", f"{zero} > +5%"]) == 2
    err = capsys.readouterr().err.strip()
    assert "relative change is undefined" in err and "\n" not in err and "Traceback" not in err


@needs_shared
def test_compare_across_sources_reports_added_and_removed_names():
    result = api.compare([NS_TRACE, NVFUSER], labels=["torch", "nsys"]).result
    assert set(result.names.status) == {"removed", "added"}  # nothing in common between the two
    metrics = result.metrics.set_index("metric")
    # Per step: the nsys trace's steps are the 1,000 calls of its NVTX range "test", one kernel each.
    assert metrics.loc["kernel_count", "nsys"] == 1


def test_compare_says_which_remedies_one_trace_needs_and_the_other_not() -> None:
    """Before/after: what the change brought in (anomaly detection turned on) and what it fixed (the
    fused optimizer, once used, is no longer advised); remedies match by their words, not their figures."""
    cpu = Path(__file__).parent / "data" / "cpu"
    on = api.compare([cpu / "anomaly_detection_off.pt.trace.json.gz", cpu / "anomaly_detection.pt.trace.json.gz"]).result
    [change] = on.remedy_changes
    assert [x.split(":")[0] for x in change.added][0] == "turn autograd's anomaly detection off outside debugging"
    assert change.dropped == []
    assert [d.label for d in on.diagnoses] == ["A", "B"] and "anomaly_detection" in on.diagnoses[1].findings
    assert any("remedies for B only: 'turn autograd's anomaly detection off" in f for f in on.findings), on.findings
    fused = api.compare([cpu / "adamw_per_parameter.pt.trace.json.gz", cpu / "adamw_fused.pt.trace.json.gz"])
    [change] = fused.result.remedy_changes
    assert change.added == [] and [x[:25] for x in change.dropped] == ["use the fused optimizer, "]
    doc = json.loads(api.render(fused, "json"))
    assert doc["remedy_changes"][0]["dropped"] == change.dropped and doc["diagnoses"][0]["verdict"]
    same = api.compare([cpu / "adamw_fused.pt.trace.json.gz", cpu / "adamw_fused.pt.trace.json.gz"]).result
    assert same.remedy_changes[0].added == same.remedy_changes[0].dropped == []
    assert any(f.endswith("with the same remedies.") for f in same.findings)


def test_compare_of_three_traces_says_which_trace_added_or_removed_a_name():
    """A name the second trace keeps and the third drops is removed in the third only (it was
    "removed" outright, beside a count of 40 in the second)."""
    h100 = Path(__file__).parent / "data" / "h100"
    a, b, c = (h100 / f"{v}-cuda-fp32-b16-h256-i256-l1-t10.pt.trace.json.gz"
               for v in ("custom_eager", "lstmcell_loop", "custom_compile_cudagraphs"))
    names = api.compare([a, b, c]).result.names
    for row in names.itertuples():
        counts = {"B": row.count_B, "C": row.count_C}
        if row.count_A == 0:
            assert row.status == "added in " + ", ".join(k for k, v in counts.items() if v > 0), row
        elif all(v > 0 for v in counts.values()):
            assert row.status == "common", row
        else:
            assert row.status == "removed in " + ", ".join(k for k, v in counts.items() if v == 0), row
    assert {"removed in C", "removed in B, C", "added in B", "added in C"} <= set(names.status)


def _png_is_blank(png: bytes) -> bool:
    """True when every pixel of an 8-bit RGB(A) PNG has the same colour."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        chunk = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width = struct.unpack(">I", chunk[:4])[0]
        if kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = len(raw) // (len(raw) // (1 + width * 4)) if len(raw) % (1 + width * 3) else 1 + width * 3
    # Filter bytes aside, a blank image has one repeated pixel; count distinct scanline payloads.
    rows = {raw[i + 1:i + stride] for i in range(0, len(raw), stride)}
    return len(rows) <= 2


def _page_requests(netlog: Path) -> list[str]:
    """URLs the page itself requested (Chromium's own background requests have no origin)."""
    log = json.loads(netlog.read_text())
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for e in log["events"]:
        p = e.get("params", {})
        if e["type"] != start_job or "url" not in p:
            continue
        if p.get("initiator") != "not an origin" and not p["url"].startswith("file:"):
            urls.append(p["url"])
    return urls


def _chromium(page: Path, tmp: Path) -> tuple[bytes, list[str]]:
    assert CHROMIUM is not None
    shot, netlog = tmp / f"{page.stem}.png", tmp / f"{page.stem}.netlog.json"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--no-first-run", "--disable-sync", f"--log-net-log={netlog}", "--window-size=1280,1600",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120, check=True)
    return shot.read_bytes(), _page_requests(netlog)


@needs_shared
@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (Debian: apt-get install chromium)")
def test_html_report_renders_in_chromium_without_network(tmp_path):
    page = tmp_path / "report.html"
    assert main(["report", str(NS_TRACE), "-o", str(page)]) == 0
    png, requests = _chromium(page, tmp_path)
    assert not _png_is_blank(png)
    assert requests == []
    # The check itself can fail: a page with remote resources is caught.
    control = tmp_path / "control.html"
    control.write_text('<html><body><img src="http://example.invalid/x.png">x</body></html>')
    _, control_requests = _chromium(control, tmp_path)
    assert control_requests == ["http://example.invalid/x.png"]
    blank = tmp_path / "blank.html"
    blank.write_text("<html><body></body></html>")
    assert _png_is_blank(_chromium(blank, tmp_path)[0])


def test_sentences_name_kernels_by_their_base_name():
    from tracekit.analyze.classify import short_name

    long = "void at::native::vectorized_elementwise_kernel<4, " + "x" * 3000 + ">(int, " + "y" * 2000 + ")"
    assert short_name(long) == "at::native::vectorized_elementwise_kernel"
    assert len(short_name("k" * 500)) == 80


@needs_shared
def test_steps_that_do_not_overlap_are_a_difference_even_with_a_wide_spread():
    """HTA's trace_diff pair: every test step (82-166 ms) is slower than every control step (75-81 ms);
    the test steps scatter (CV 28%), but that is no reason to call them the same."""
    diff = TRACES / "hta" / "trace_diff"
    findings = api.compare([diff / "control" / "control.json.gz", diff / "test" / "test.json.gz"],
                           labels=["control", "test"]).result.findings
    assert any(f.startswith("test takes 1.49x as long as control per step") for f in findings), findings
    assert not any("within noise" in f for f in findings)


@needs_shared
def test_gap_starts_are_shown_from_the_trace_start_not_as_epoch_numbers(capsys):
    assert main(["launch", str(NVFUSER), "-f", "markdown"]) == 0
    text = capsys.readouterr().out
    gaps = text.split("Longest gaps")[1].split("\n\n")[1]
    first = gaps.splitlines()[2].split("|")[2].strip()  # header, rule, first row; column 2 is the start
    # The longest gap of the steps used (the first call, 199 ms of compilation, is warm-up), 4.0 s into
    # the 4.1 s capture; as an epoch time it would read 1.6e9 s.
    assert first.endswith(" s") and 3.9 < float(first[:-2]) < 4.1, first


@needs_shared
def test_gpu_metrics_are_per_device_so_idle_never_exceeds_the_capture():
    """The TF BERT worker ran on 3 of its 8 GPUs: summed over devices, idle time would be 3 device
    spans; per device it fits inside the capture, as in compare and the dataset's per-trace rows."""
    from tracekit.analyze.compare import summarize

    m = summarize(tracekit.load(TRACES / "xprof" / "tf_bert_8xV100_gpu_multi_worker.xplane.pb"), "bert").metrics
    assert m["gpu_devices"] == 3
    assert m["idle_time"] <= m["gpu_time"] <= m["total_time"]
    # The verdict reads the 2 steps (one on GPU 4, one on GPU 6): their device spans, added; each
    # step's window holds its kernels' extent and the step's edges before and after them.
    launch = tracekit.launch(TRACES / "xprof" / "tf_bert_8xV100_gpu_multi_worker.xplane.pb").result
    in_steps = launch.breakdown.gpu[launch.breakdown.gpu.step >= 0]
    assert launch.judged_steps == 2 and launch.gpu_devices == 2
    assert in_steps.span_ns.sum() <= launch.gpu_span_ns < 1.01 * in_steps.span_ns.sum() < m["gpu_time"]
    assert any("in the 2 step(s) used (2 GPUs' spans added)" in e for e in launch.evidence)


@needs_shared
def test_a_range_counts_every_kernel_its_cuda_graph_launches_replay():
    """HTA's trace_diff test trace replays part of each step from cudaGraphLaunch: one correlation id
    for 315 or 429 kernels. The step range's GPU ops are every activity launched in it, by any thread
    of its process: the autograd thread launches the backward pass (1,465 of 2,503 here)."""
    import numpy as np

    from tracekit.analyze.frame import GPU_BUSY_KINDS, frame_of

    path = TRACES / "hta" / "trace_diff" / "test" / "test.json.gz"
    table = tracekit.load(path)
    frame = frame_of(table)
    inst = api.ranges(table).result.instances
    step = inst[inst.name == "ProfilerStep#1011"].iloc[0]
    # Activities whose launch call runs inside the step, on any thread of the step's process.
    gpu = frame.rows(*GPU_BUSY_KINDS)
    gpu = gpu[frame.launch_row[gpu] >= 0]
    launch = frame.launch_row[gpu]
    row = int(step.row)
    inside = (frame.pid[launch] == frame.pid[row]) & (frame.start[launch] >= frame.start[row]) & (
        frame.start[launch] < frame.end[row])
    assert step.gpu_ops == inside.sum()
    assert (frame.thread_key[launch[inside]] != frame.thread_key[row]).sum() == 1465
    graph = [i for i, n in enumerate(frame.names) if n == "cudaGraphLaunch"]
    replayed = np.isin(frame.name_code[launch[inside]], graph).sum()
    assert replayed >= 315  # one graph launch, hundreds of kernels: each one counts


@needs_shared
def test_html_page_keeps_its_embedded_data_within_a_budget():
    """A page's embedded data is cut to its budget (lists keep their first entries, and say how long
    they were), stays valid JSON, and the page says so; under the budget it is left whole. HTA's
    trace_diff trace has 1.9 MB of launch gaps alone (a million-event trace: ~100 MB)."""
    import json as json_module
    import re

    from tracekit.render import html_report
    from tracekit.render.json_report import _clean

    result = api.launch(TRACES / "hta" / "trace_diff" / "test" / "test.json.gz")
    full = _clean(api.document(result).data)
    assert len(json_module.dumps(full)) > html_report.MAX_DATA_BYTES
    page = api.render(result, "html")
    assert len(page) < 2_000_000 and "cut to fit it" in page
    embedded = json_module.loads(re.search(r'id="tracekit-data">(.*)</script>', page).group(1))
    assert embedded["truncated"] == {"gaps": len(full["gaps"])} and embedded["verdict"] == full["verdict"]
    text, what = html_report.embedded_data(full, budget=20_000)
    data = json_module.loads(text)
    assert len(text) <= 20_000 and what and data["truncated"]["gaps"] == len(full["gaps"])
    assert data["gaps"] == full["gaps"][:len(data["gaps"])]
    assert html_report.embedded_data({"a": list(range(10))}, budget=20_000) == ('{"a":[0,1,2,3,4,5,6,7,8,9]}', "")


@needs_shared
def test_ranges_of_a_cpu_only_trace_leave_out_the_gpu_columns(capsys):
    """A CPU capture's ranges launch nothing: three columns of zeros would say nothing (JSON keeps them)."""
    cpu = TRACES / "xprof" / "cpu_tf2.21" / "lstm_keras_fn.xplane.pb"
    assert main(["ranges", str(cpu), "-f", "markdown"]) == 0
    page = capsys.readouterr().out
    header = next(line for line in page.splitlines() if line.startswith("| range |"))
    assert "GPU" not in header and "No range launched GPU work" in page
    assert main(["ranges", str(cpu), "-f", "json"]) == 0
    assert all("gpu_ops" in r for r in json.loads(capsys.readouterr().out)["summary"])
    gpu = Path(__file__).parent / "data" / "h100" / "nn_lstm_amp-cuda-fp16-b64-h256-i256-l1-t20.pt.trace.json.gz"
    assert main(["ranges", str(gpu), "-f", "markdown"]) == 0
    assert "| GPU projection |" in capsys.readouterr().out


@needs_shared
def test_compare_says_when_work_moved_from_one_class_into_another():
    """The Keras LSTM's per-timestep MatMuls (gemm) become one BlockLSTM op (rnn): the rise in rnn
    alone would read as new work."""
    cpu = TRACES / "xprof" / "cpu_tf2.21"
    findings = api.compare([cpu / "lstm_keras_eager.xplane.pb", cpu / "lstm_raw_blocklstm_fn.xplane.pb"]).result.findings
    moved = next(f for f in findings if f.startswith("The largest change in classified work"))
    assert "framework-op rnn time" in moved and "framework-op gemm time fell" in moved and "moved out of" in moved


@needs_shared
def test_compare_writes_median_counts_as_they_are():
    """HTA's trace_compare pair: the median kernels per step is 0.5 in one trace (steps of 0 and 1
    kernels), which read "0 GPU kernels against 1 (-50.0%)"."""
    pair = TRACES / "hta" / "trace_compare"
    findings = api.compare([pair / "base" / "base.json.gz", pair / "test" / "test.json.gz"]).result.findings
    assert "B runs 0.5 GPU kernels per step against 1 in A (-50.0%)." in findings, findings
    assert "B runs 3.5 framework ops per step against 2 in A (+75.0%)." in findings, findings


def test_compare_names_no_class_change_smaller_than_run_to_run_noise():
    """Two captures of the same DataLoader loop (tests/data/cpu/make_loader_workers.py): GEMM time moved
    33 µs of a 2 ms step, reduction time 19 µs, and the finding said work "may have moved into that
    class (a fused op doing what separate ops did)". Below 5% of the step it is not stated."""
    data = Path(__file__).parent / "data" / "cpu"
    findings = api.compare([data / "loader_workers_fetch_largest.pt.trace.json.gz",
                            data / "loader_workers_dispatch_largest.pt.trace.json.gz"]).result.findings
    assert any("not distinguishable per step" in f for f in findings), findings
    assert not any(f.startswith("The largest change in classified work") for f in findings), findings


def test_compare_says_where_the_steps_cover_their_loops_unlike() -> None:
    """Keras's fit in graph mode marks its per-batch function calls, which leave 11% of its loop (Keras's
    Python between batches) out; an eager loop's steps run fetch to fetch, all of it. The per-step ratio
    compares unlike spans: compare says so, with the ratio per loop iteration (step / cover)."""
    tf = Path(__file__).parent / "data" / "tf"
    result = api.compare([tf / "keras_fit.xplane.pb", tf / "eager_fetch_loop.xplane.pb"], labels=["graph", "eager"]).result
    graph, eager = result.diagnoses
    assert 0.8 < graph.step_cover < 0.95 and eager.step_cover == 1.0
    said = next(f for f in result.findings if f.startswith("graph's steps cover"))
    metrics = result.metrics.set_index("metric")
    ratio = (metrics.loc["step_time", "eager"] / eager.step_cover) / (metrics.loc["step_time", "graph"] / graph.step_cover)
    assert f"per loop iteration (a step and the time to the next), eager takes {ratio:.2f}x as long as graph" in said
    # ProfilerStep#N runs from one prof.step() to the next: both cover their loops, nothing said.
    cpu = Path(__file__).parent / "data" / "cpu"
    alike = api.compare([cpu / "adamw_fused.pt.trace.json.gz", cpu / "adamw_per_parameter.pt.trace.json.gz"]).result
    assert not any("steps cover" in f for f in alike.findings)
