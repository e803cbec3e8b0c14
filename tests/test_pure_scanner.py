"""The pure-Python Kineto scanner (used when the C extension was not built) gives the same tables.

Every shared Kineto trace is ingested twice, once per backend, and the two tables must be equal,
values and metadata alike. The nesting pass is shared by every format, so one XSpace and one nsys
trace go through the pure-Python ``nest`` too.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO, ids, needs_shared, shared_files

import tracekit
from tracekit import _native
from tracekit._native import pure
from tracekit.errors import InputError

KINETO = [p for p in shared_files("hta/**/*.json*") if "exports" not in p.parts]
OTHER_FORMATS = shared_files("xprof/cpu_tf2.21/**/*.xplane.pb")[:1] + shared_files("nsys/nvfuser_launch1000*.sqlite")


def _load_both(path, monkeypatch):
    fast = tracekit.load(path)
    monkeypatch.setattr(_native, "scanner", pure)
    slow = tracekit.load(path)
    return fast, slow


@pytest.mark.skipif(_native.BACKEND != "c", reason="the C extension is not built here: nothing to compare against")
@needs_shared
@pytest.mark.parametrize("path", KINETO + OTHER_FORMATS, ids=ids(KINETO + OTHER_FORMATS))
def test_pure_python_backend_gives_the_same_table(path, monkeypatch):
    fast, slow = _load_both(path, monkeypatch)
    assert slow.schema.equals(fast.schema, check_metadata=True)
    for name in fast.column_names:
        assert slow.column(name).equals(fast.column(name)), name


@pytest.mark.skipif(_native.BACKEND != "c", reason="the C extension is not built here: nothing to compare against")
def test_pure_python_backend_on_a_fresh_torch_trace(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    lstm = torch.nn.LSTM(8, 16)
    x = torch.randn(5, 2, 8)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(2):
            with record_function("phase::forward"):
                lstm(x)
            prof.step()
    path = tmp_path / "lstm.pt.trace.json"
    prof.export_chrome_trace(str(path))
    fast, slow = _load_both(path, monkeypatch)
    assert fast.num_rows > 50
    assert slow.equals(fast, check_metadata=True)


@pytest.mark.parametrize("text, problem", [
    (b"", "empty"),
    (b'{"traceEvents": [{"ph": "X", "ts": 1', "truncated"),
    (b'{"traceEvents": [{"ph": "X", "name": "a', "truncated"),
    (b'{"traceEvents": [1, 2]}', "not an object"),
    (b'{"traceEvents": []} x', "extra data"),
    (b'{"traceEvents": [{"ts": 1e400}]}', "out of range"),
    (b'{"traceEvents": [{"ts": NaN}]}', "NaN"),
    (b'{"traceEvents": [{"name": "\xff"}]}', "UTF-8"),
    (b'{"traceEvents": [{"name": "\\ud800"}]}', "surrogate"),
])
def test_pure_python_backend_rejects_bad_json_in_one_line(tmp_path, monkeypatch, text, problem):
    path = tmp_path / "bad.json"
    path.write_bytes(text)
    monkeypatch.setattr(_native, "scanner", pure)
    with pytest.raises(InputError) as e:
        tracekit.load(path)
    assert problem in str(e.value) and "\n" not in str(e.value)


def test_tracekit_runs_without_the_c_extension():
    """Forced onto the pure-Python path, the console script still reads JSON and reports."""
    code = ("import tracekit._native as n, tracekit.cli as c, sys; assert n.BACKEND == 'python'; "
            "sys.exit(c.main(['--version']))")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         env={"TRACEKIT_PURE_PYTHON": "1", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
