"""tracekit ingest / info in-process: lossless Parquet round trip, atomic writes, --force."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TRACES, assert_written_encodings, needs_shared

import tracekit
from tracekit.cli import main

SAMPLES = [
    TRACES / "hta" / "critical_path" / "alexnet" / "benchmark_result_2869224_1695835535_trace.json.gz",
    TRACES / "xprof" / "cpu_tf2.21" / "lstm_raw_blocklstm_fn.xplane.pb",
    TRACES / "nsys" / "nvfuser_matmul_nsys2024.6.sqlite",
]


@needs_shared
@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_ingest_round_trip_is_lossless(path, tmp_path, capsys):
    out = tmp_path / "t.parquet"
    assert main(["ingest", str(path), "-o", str(out)]) == 0
    original = tracekit.load(path)
    again = tracekit.load(out)
    assert again.equals(original)
    assert again.schema.metadata == original.schema.metadata
    assert_written_encodings(out)
    assert main(["info", str(out), "--format", "json"]) == 0
    from_parquet = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert from_parquet["events"] == original.num_rows
    assert from_parquet["counts_by_kind"] == tracekit.info(original).counts_by_kind


@needs_shared
def test_ingest_refuses_to_overwrite_without_force(tmp_path, capsys):
    out = tmp_path / "t.parquet"
    out.write_text("keep me")
    assert main(["ingest", str(SAMPLES[0]), "-o", str(out)]) == 1
    assert "already exists" in capsys.readouterr().err
    assert out.read_text() == "keep me"
    assert main(["ingest", str(SAMPLES[0]), "-o", str(out), "--force"]) == 0
    assert tracekit.load(out).num_rows > 0
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]  # no temp files left


@needs_shared
def test_ingest_several_traces_into_a_dataset(tmp_path):
    from tracekit.dataset import read_index

    out = tmp_path / "dataset"
    assert main(["ingest", *map(str, SAMPLES), "-o", str(out)]) == 0
    entries = read_index(out)
    assert sorted(Path(e.source_file).name for e in entries) == sorted(p.name for p in SAMPLES)
    assert sorted(e.source for e in entries) == ["nsys", "tf", "torch"]
    assert all((out / e.partition).exists() and e.partition.startswith(f"source={e.source}/") for e in entries)


@needs_shared
def test_info_terminal_output(capsys):
    assert main(["info", str(SAMPLES[0])]) == 0
    out = capsys.readouterr().out
    assert "kernel->launch links" in out and "100.0 %" in out and "gpu_kernel" in out


def test_names_with_emoji_codes_are_printed_as_written(tmp_path, capsys):
    # Rich turns ":fire:" into an emoji unless told not to; a file, device or kernel name is data.
    trace = tmp_path / "run:fire:1.pt.trace.json.gz"
    trace.write_bytes((Path(__file__).parent / "data" / "h100" /
                       "nn_lstm_amp-cuda-fp16-b64-h256-i256-l1-t20.pt.trace.json.gz").read_bytes())
    assert main(["info", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "run:fire:1" in out and "\N{FIRE}" not in out
    from tracekit.render.terminal_report import data_console

    console = data_console(record=True, width=80)
    console.print("kernel :fire: x")
    assert console.export_text().strip() == "kernel :fire: x"


@needs_shared
@pytest.mark.parametrize("columns, widest", [(None, 120), ("200", 200), ("80", 80)])
def test_piped_output_width_follows_columns(columns, widest, capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    if columns:
        monkeypatch.setenv("COLUMNS", columns)
    assert main(["launch", str(SAMPLES[0])]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= widest
    if widest > 120:
        assert max(len(line) for line in lines) > 120  # the wider table really used the room


@needs_shared
def test_every_report_command_takes_short_f(capsys):
    assert main(["info", str(SAMPLES[0]), "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["events"] > 0


@pytest.mark.parametrize("where", ["reading", "analysis"])
def test_running_out_of_memory_is_a_one_line_error(monkeypatch, capsys, where):
    """A trace too big for the machine: the CLI says so in one line instead of a MemoryError traceback,
    whether the reader (on the second thread) or the analysis runs out."""
    import tracekit.api
    import tracekit.ingest

    def too_big(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(tracekit.ingest if where == "reading" else tracekit.api, "_read" if where == "reading" else "report", too_big)
    assert main(["report", "tests/data/jax/scan_rnn.xplane.pb"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tracekit: error: out of memory")


def test_the_api_names_survive_lazy_loading():
    """tracekit.render is both a subpackage and a function: loading the renderers must not hide the function."""
    import tracekit
    import tracekit.api  # noqa: F401
    import tracekit.render.html_report  # noqa: F401

    assert callable(tracekit.render) and callable(tracekit.report) and callable(tracekit.load)
    assert set(tracekit.__all__) <= set(dir(tracekit))


STARTUP_CHILD = """
import contextlib, io, os, sys
from tracekit.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(["info", sys.argv[1]])
print(rc, "pandas" in sys.modules, os.environ.get("OPENBLAS_NUM_THREADS"), "pyarrow.compute" in sys.modules,
      "numpy.ma" in sys.modules, "rich._emoji_codes" in sys.modules)
"""


@pytest.mark.parametrize("trace", ["tests/data/jax/scan_rnn.xplane.pb",
                                   "tests/data/h100/custom_compile-cuda-fp32-b16-h256-i256-l1-t20.pt.trace.json.gz",
                                   "../shared/traces/nsys/nvfuser_launch1000_v100_nsys2023.4.sqlite"])
def test_info_starts_without_pandas(trace):
    # pandas is most of `info`'s start-up (0.25 of ~0.5 s); pyarrow's pa.array and pa.scalar import
    # it on first use, so the ingest and the summary build Arrow arrays from buffers.
    import subprocess
    import sys

    repo = Path(__file__).resolve().parent.parent
    if not (repo / trace).exists():
        pytest.skip(f"real trace not found: {trace} (../shared is absent)")
    out = subprocess.run([sys.executable, "-c", STARTUP_CHILD, str(repo / trace)], capture_output=True, text=True,
                         check=True, cwd=repo).stdout.split()
    # Exit 0, no pandas, and the one-thread OpenBLAS setting was undone after numpy's import; no
    # pyarrow.compute (40 ms) either where the C readers are built (nsys joins args with it without);
    # no numpy.ma (15 ms: numpy 2.4's np.unique imports it) and no emoji table (5 ms).
    from tracekit import _native

    compute = trace.endswith(".sqlite") and _native.sqlite_reader() is None
    assert out == ["0", "False", "None", str(compute), "False", "False"]


def test_the_console_script_exits_without_teardown_after_writing_all_it_printed(tmp_path, capsys):
    """An analysis command's process ends with os._exit (no interpreter teardown, tracekit.cli.console_main):
    what it printed to a pipe (block-buffered) and the file it wrote are whole, as in-process."""
    trace = str(Path(__file__).parent / "data" / "cpu" / "fetch_loop.pt.trace.json.gz")
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # a pipe is block-buffered
    piped = subprocess.run([sys.executable, "-m", "tracekit", "report", trace, "-f", "markdown"],
                           capture_output=True, text=True, env=buffered)
    assert piped.returncode == 0 and piped.stderr == ""
    assert main(["report", trace, "-f", "markdown"]) == 0
    assert piped.stdout == capsys.readouterr().out and len(piped.stdout) > 2000
    out = tmp_path / "r.json"
    wrote = subprocess.run([sys.executable, "-m", "tracekit", "report", trace, "-f", "json", "-o", str(out)],
                           capture_output=True, text=True)
    assert wrote.returncode == 0 and json.loads(out.read_text())["verdict"]
    failed = subprocess.run([sys.executable, "-m", "tracekit", "report", str(tmp_path / "absent.json")],
                            capture_output=True, text=True)
    assert failed.returncode == 1 and failed.stdout == "" and failed.stderr.count("\n") == 1


HUGE_PAGE_CHILD = """
import os, sys
from tracekit.cli import main
assert main(["report", sys.argv[1], "-f", "json", "-o", sys.argv[2], "--force"]) == 0
import pyarrow  # loaded by the report
marked = sum(1 for line in open("/proc/self/smaps") if line.startswith("VmFlags") and " hg" in line)
print(marked, os.environ.get("MIMALLOC_ALLOW_THP"))
"""


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux's /proc/self/smaps")
def test_the_command_lines_arrow_buffers_ask_for_no_huge_pages_unless_the_user_set_it(tmp_path):
    """Arrow's mimalloc marks its arenas for huge pages (VmFlags ``hg``) unless told not to before
    pyarrow loads; the command line tells it (tracekit/pages.py), a value the user set stands."""
    trace = str(Path(__file__).parent / "data" / "cpu" / "ddp_gloo_rank0.pt.trace.json.gz")
    env = {k: v for k, v in os.environ.items() if k not in ("MIMALLOC_ALLOW_THP", "NUMPY_MADVISE_HUGEPAGE")}
    run = lambda extra: subprocess.run(  # noqa: E731
        [sys.executable, "-c", HUGE_PAGE_CHILD, trace, str(tmp_path / "r.json")], env={**env, **extra},
        capture_output=True, text=True, check=True).stdout.split()
    assert run({}) == ["0", "0"]  # no region of the process asks for huge pages
    assert run({"MIMALLOC_ALLOW_THP": "1"})[1] == "1"


def test_the_command_line_turns_numpys_huge_page_hint_off_unless_the_user_set_it(monkeypatch, capsys):
    """A big trace's analysis spends seconds of system time zeroing and compacting the huge pages numpy
    asks for (tracekit/pages.py); the command line's process asks for base pages, the library does not."""
    np_multiarray = pytest.importorskip("numpy._core.multiarray")
    pytest.importorskip("torch")  # collect torch --list below
    hint = np_multiarray._set_madvise_hugepage  # sets the hint, returns the one before
    trace = str(Path(__file__).parent / "data" / "cpu" / "ddp_gloo_rank0.pt.trace.json.gz")
    original = hint(True)
    try:
        monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
        tracekit.load(trace)
        assert hint(True) is True  # the library leaves it
        assert main(["info", trace]) == 0
        assert hint(True) is False  # the command turned it off
        assert main(["collect", "torch", "--list"]) == 0
        assert hint(True) is True  # a command that runs workloads leaves them numpy's default
        monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")
        assert main(["info", trace]) == 0
        assert hint(True) is True  # the user's choice stands
    finally:
        hint(original)
    capsys.readouterr()
