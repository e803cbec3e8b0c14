"""Golden output: what report, launch, ranges and compare print (terminal and Markdown) on real traces,
against checked-in text in tests/golden/. A wording or layout change shows up as a diff here.

After an intended change, rewrite the expected files and review the diff:
    TRACEKIT_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import TRACES, needs_shared

from tracekit.cli import main

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("TRACEKIT_UPDATE_GOLDEN") == "1"
# One trace per source: a Kineto GPU trace, an Nsight Systems export, a TF XSpace CPU trace.
CASES = {
    "kineto_gpu": ["hta/trace_diff/control/control.json.gz"],
    "nsys": ["nsys/nvfuser_launch1000_v100_nsys2023.4.sqlite"],
    "xspace_cpu": ["xprof/cpu_tf2.21/lstm_keras_fn.xplane.pb"],
}
COMMANDS = {
    "report": CASES, "launch": CASES, "ranges": {"kineto_gpu": CASES["kineto_gpu"], "nsys": CASES["nsys"]},
    "compare": {"kineto_gpu": ["hta/trace_diff/control/control.json.gz", "hta/trace_diff/test/test.json.gz"]},
}
PARAMS = [(cmd, case, fmt) for cmd, cases in COMMANDS.items() for case in cases for fmt in ("terminal", "markdown")]


@needs_shared
@pytest.mark.parametrize(("command", "case", "fmt"), PARAMS, ids=[f"{c}-{k}-{f}" for c, k, f in PARAMS])
def test_output_matches_the_golden_text(command, case, fmt, capsys, monkeypatch):
    monkeypatch.chdir(TRACES)  # relative trace paths: the text does not depend on where ../shared is
    monkeypatch.setenv("COLUMNS", "120")
    assert main([command, *COMMANDS[command][case], "-f", fmt]) == 0
    text = capsys.readouterr().out
    expected = GOLDEN / f"{command}-{case}.{'md' if fmt == 'markdown' else 'txt'}"
    if UPDATE:
        expected.parent.mkdir(exist_ok=True)
        expected.write_text(text)
    assert expected.exists(), f"no golden file {expected.name}; create it with TRACEKIT_UPDATE_GOLDEN=1"
    assert text == expected.read_text(), f"{command} {case} -f {fmt} differs from {expected.name}"
