"""The Nsight Systems path on a CPU machine: NVTX phase ranges really recorded, exported, ingested.

Needs an ``nsys`` (``collectors/get_nsys.sh`` unpacks Debian's 2023.4 without root; CI runs it);
skips with the reason when there is none. The nsys-missing error is tested either way.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from tracekit.collectors import nsys

from tracekit import api, manifest
from tracekit.cli import main


def _nsys_or_skip() -> Path:
    try:
        exe = nsys.find_nsys()
    except nsys.NsysError as e:
        pytest.skip(f"no nsys here ({e.one_line()[:80]}...); run collectors/get_nsys.sh")
    if nsys.find_importer(exe) is None:
        pytest.skip("nsys found but no QdstrmImporter to turn its .qdstrm into a report; run collectors/get_nsys.sh")
    return exe


@pytest.fixture(scope="module")
def nsys_collection(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    _nsys_or_skip()
    out = tmp_path_factory.mktemp("nsys") / "c"
    code = main(["collect", "torch", "--preset", "tiny", "--variants", "lm_train", "--profiler", "nsys",
                 "-o", str(out), "--no-progress"])
    assert code == 0
    return out


def test_nsys_run_records_the_nvtx_phase_ranges_and_steps(nsys_collection):
    m = manifest.read_manifest(nsys_collection)
    (row,) = m.rows
    assert row["status"] == "ok" and row["profiler"] == "nsys"
    assert row["nvtx"].endswith("domain 'tracekit'")
    sqlite_path, rep = m.trace_paths(row)
    assert sqlite_path.suffix == ".sqlite" and rep.suffix == ".nsys-rep" and rep.exists()
    assert not list(sqlite_path.parent.glob("*.qdstrm"))  # the large stream is removed once imported

    # In nsys's own tables: push/pop ranges (59) with registered names in the tracekit domain.
    with sqlite3.connect(sqlite_path) as con:
        names = {name for (name,) in con.execute(
            "SELECT s.value FROM NVTX_EVENTS e JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59")}
    assert {"zero_grad", "forward", "loss", "backward", "optimizer"} <= names

    ranges = api.ranges(sqlite_path).result.summary.set_index("name")
    steps = 2 + 2  # tiny preset: 2 warm-up + 2 profiled steps, all in the child under nsys
    for phase_name in ("forward", "loss", "backward", "optimizer"):
        assert ranges.loc[f"tracekit:{phase_name}", "instances"] == steps
    report = api.report(sqlite_path)
    assert report.breakdown.steps == [0, 1, 2, 3]  # NVTX step#N ranges are steps


def test_missing_nsys_says_how_to_get_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("TRACEKIT_NSYS", raising=False)
    with pytest.raises(nsys.NsysError, match="get_nsys.sh"):
        nsys.find_nsys()
    pytest.importorskip("torch")
    assert main(["collect", "torch", "--profiler", "nsys", "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tracekit: error: nsys not found") and "get_nsys.sh" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_qdstrm_without_importer_explains_what_to_do(tmp_path):
    stream = tmp_path / "run.qdstrm"
    stream.write_bytes(b"x")
    with pytest.raises(nsys.NsysError, match="python -m tracekit.collectors.nsys import run.qdstrm"):
        nsys.import_qdstrm(stream, None)


H100_STREAM = Path(__file__).parent / "data" / "h100" / "matmul-nsys2025.3-head.qdstrm"


def test_a_stream_from_another_nsys_release_is_named_before_the_importer_fails(tmp_path):
    # The first 4 KB of a .qdstrm that the nsys 2025.3 bundled with Nsight Compute wrote on an H100.
    assert nsys.stream_version(H100_STREAM) == "2025.3.1.0"
    exe = _nsys_or_skip()
    importer = nsys.find_importer(exe)
    assert importer is not None
    if nsys._release(nsys._version_text(importer)) == "2025.3":
        pytest.skip("this QdstrmImporter is 2025.3 itself")
    stream = tmp_path / "matmul.qdstrm"
    stream.write_bytes(H100_STREAM.read_bytes())
    with pytest.raises(nsys.NsysError, match=r"written by Nsight Systems 2025\.3\.1\.0, but the QdstrmImporter found is"):
        nsys.import_qdstrm(stream, importer)
    assert stream.exists()  # not deleted: it can still be imported elsewhere
