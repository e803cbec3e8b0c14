"""Names are data: a trace whose names hold terminal control sequences, Markdown pipes or HTML markup
changes no terminal and injects no markup, in any command or format. The trace is a real
torch.profiler capture with one op renamed, as an attacker would edit a file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracekit.cli import main

torch = pytest.importorskip("torch")

EVIL = "aten::mm\x1b]0;pwned\x07\x1b[31mred\x9b2J|pipe\nline</script><script>alert(1)</script>"
CONTROLS = ("\x1b", "\x07", "\x9b")


def _capture(path: Path) -> Path:
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(32, 32)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            x = torch.tanh(x @ x)
    prof.export_chrome_trace(str(path))
    return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("names")
    clean = _capture(d / "clean.json")
    doc = json.loads(clean.read_text())
    renamed = 0
    for ev in doc["traceEvents"]:
        if ev.get("name") == "aten::mm":
            ev["name"] = EVIL
            renamed += 1
    assert renamed
    evil = d / "evil.json"
    evil.write_text(json.dumps(doc))
    return clean, evil


@pytest.mark.parametrize("command", ["info", "report", "launch", "ranges", "compare"])
@pytest.mark.parametrize("fmt", ["terminal", "markdown", "json", "html"])
def test_control_characters_in_names_never_reach_the_output(traces, command, fmt, capsys):
    clean, evil = traces
    if command == "info" and fmt in ("markdown", "html"):
        pytest.skip("info prints terminal or JSON")
    argv = [command, str(clean), str(evil)] if command == "compare" else [command, str(evil)]
    assert main([*argv, "-f", fmt]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in CONTROLS), [c for c in CONTROLS if c in out]
    if fmt == "html":
        assert "<script>alert" not in out  # neither in the page nor out of the embedded JSON
        assert out.count("</script>") == 1  # the data block's own end
        if command == "compare":  # its name table shows whole names, escaped
            assert "&lt;/script&gt;&lt;script&gt;alert" in out
    if fmt in ("terminal", "markdown", "html") and command in ("report", "compare"):
        assert "\\x1b]0;pwned\\x07" in out  # shown, visibly
    if fmt == "markdown":
        assert not any(line.count("|") and "pipe" in line and "\\|pipe" not in line for line in out.splitlines())


def test_an_error_about_a_file_name_with_a_newline_stays_on_one_line(tmp_path, capsys):
    bad = tmp_path / "two\nlines\x1b[2J.json"
    bad.write_text("not a trace")
    assert main(["info", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "two\\nlines\\x1b[2J.json" in err
