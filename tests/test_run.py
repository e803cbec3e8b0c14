"""`tracekit run` end to end on the tiny preset: every collector, the baseline, the dataset, the report."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from test_reports import CHROMIUM, _chromium, _png_is_blank

from tracekit import manifest
from tracekit.cli import main

pytest.importorskip("torch")


# What `tracekit run --no-progress` itself may print on stderr: one line per run, and notes.
OWN_LINE = re.compile(r"^(ok|skipped|failed)\s+\S+|^note: ")


@pytest.fixture(scope="module")
def terminal_and_study(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The real console entry point in a child process, as a user runs it, under umask 022."""
    out = tmp_path_factory.mktemp("run") / "study"
    run = subprocess.run([sys.executable, "-m", "tracekit", "run", "--preset", "tiny", "-o", str(out), "--no-progress",
                          "--no-nsys"], cwd=REPO, capture_output=True, text=True, preexec_fn=lambda: os.umask(0o022))
    assert run.returncode == 0, run.stderr[-2000:]
    return run, out


@pytest.fixture(scope="module")
def study(terminal_and_study) -> Path:
    return terminal_and_study[1]


def test_run_collects_every_framework_and_the_baseline(study):
    rows = manifest.read_manifest(study).rows
    frameworks = {r["framework"] for r in rows}
    expected = {"torch", "native"} | ({"tf"} if pytest.importorskip("tensorflow") else set())
    assert frameworks == expected
    # Nothing failed; what cannot run on this CPU (bf16 nn.LSTM without AVX-512/AMX) is skipped with its reason.
    assert all(r["status"] in ("ok", "skipped") for r in rows)
    skipped = [r for r in rows if r["status"] == "skipped"]
    assert all(r["error"] for r in skipped)
    text = (study / "report.md").read_text()
    for r in skipped:
        assert r["run_id"] in text.split("## Failed and skipped runs")[1] and r["error"] in text
    # Every traced run was ingested into the Parquet dataset beside it.
    traced = [r for r in rows if r.get("traces")]
    assert len(list((study / "dataset").rglob("*.parquet"))) == len(traced)


def test_report_holds_the_published_vs_measured_table(study):
    text = (study / "report.md").read_text()
    assert "## Published vs measured" in text
    for study_name in ("UCLA LSTM study", "TF LSTM modes study", "TF/PyTorch/Julia comparison", "Dai et al.", "EcoRNN"):
        assert study_name in text
    assert "No GPU on this machine" in text  # said, not left as a gap
    assert "CPU analogue:" in text
    assert "## Time against the native baseline" in text and "## Every traced run" in text
    # CPU runs are judged too: every traced run's row ends in a verdict.
    traced = text.split("## Every traced run")[1].split("\n## ")[0]
    rows = [line for line in traced.splitlines() if line.startswith("| ") and not line.startswith(("| framework", "|:"))]
    assert rows and all(line.rstrip(" |").rsplit("|", 1)[1].strip() for line in rows), rows[:3]
    data = json.loads((study / "report.html").read_text().split('<script type="application/json" id="tracekit-data">')[1]
                      .split("</script>")[0])
    assert len(data["findings"]) == 10


def test_the_native_baseline_is_in_the_report(study):
    text = (study / "report.md").read_text()
    assert "Native baseline skipped" not in text
    assert "native/cpu_blas" in text.split("## Time against the native baseline")[1]


def test_terminal_shows_only_tracekit_output_and_chatter_goes_to_the_log(terminal_and_study):
    run, out = terminal_and_study
    for line in run.stderr.splitlines():
        assert OWN_LINE.match(line), f"not tracekit's own output on the terminal: {line!r}"
    assert "Starting to trace" not in run.stdout + run.stderr and "USDT" not in run.stdout + run.stderr
    assert (out / "run.log").stat().st_size > 0
    assert str(out / "run.log") in run.stdout


def test_output_files_have_the_usual_permissions_under_umask_022(study):
    files = [study / "report.html", study / "report.md", *(study / "dataset").rglob("*.parquet")]
    assert len(files) > 2
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_the_study_is_a_library_call_too(study):
    """Re-analyzing the CLI's study directory through the API gives the report the CLI wrote."""
    import tracekit
    from tracekit.render.study_document import study_document

    analyzed = tracekit.analyze_study(study, "tiny", "cpu")
    assert analyzed.breakdowns and not analyzed.failed
    from tracekit.render.markdown_report import MarkdownRenderer

    ours = MarkdownRenderer().render(study_document(analyzed))
    written = (study / "report.md").read_text()
    # Same published-vs-measured table and per-run rows (wall time and reuse counts differ).
    part = lambda text: text.split("## Published vs measured")[1]  # noqa: E731
    assert part(ours) == part(written)


def test_a_second_run_reuses_every_finished_config(study, capsys):
    before = len(manifest.read_manifest(study).rows)
    assert main(["run", "--preset", "tiny", "-o", str(study), "--no-progress", "--no-nsys"]) == 0
    assert len(manifest.read_manifest(study).rows) == before
    assert "reused" in (study / "report.md").read_text()
    facts = (study / "report.md").read_text().split("## Summary")[0]
    assert f"0 ok, 0 failed, {before} reused" not in facts and f"{before} reused from an earlier run" in facts


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (Debian: apt-get install chromium)")
def test_study_report_renders_in_chromium_without_network(study, tmp_path):
    png, requests = _chromium(study / "report.html", tmp_path)
    assert not _png_is_blank(png)
    assert requests == []
