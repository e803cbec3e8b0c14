"""`tracekit run` end to end on the tiny preset: every collector, the baseline, the dataset, the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_reports import CHROMIUM, _chromium, _png_is_blank

from tracekit import manifest
from tracekit.cli import main

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "study"
    assert main(["run", "--preset", "tiny", "-o", str(out), "--no-progress", "--no-nsys"]) == 0
    return out


def test_run_collects_every_framework_and_the_baseline(study):
    rows = manifest.read_manifest(study).rows
    frameworks = {r["framework"] for r in rows}
    expected = {"torch", "native"} | ({"tf"} if pytest.importorskip("tensorflow") else set())
    assert frameworks == expected
    assert all(r["status"] == "ok" for r in rows)
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
    data = json.loads((study / "report.html").read_text().split('<script type="application/json" id="tracekit-data">')[1]
                      .split("</script>")[0])
    assert len(data["findings"]) == 10


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
