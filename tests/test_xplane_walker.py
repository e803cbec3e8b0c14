"""The C event walker (``tracekit/_native/xplane_events.c``) gives the XSpace reader the same table,
byte for byte, as walking events through protobuf's Python objects: on every XSpace trace here and
in ../shared, and on a real trace edited to hold what the walker must get right or hand back to
Python (every stat value type, NaN and infinities, long byte strings, references, stats without a
value, unknown stat ids, repeated stat names, repeat counts, metadata with stats, negative offsets,
kernel_details as text and as a reference)."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import TRACES, differing_columns, read_with_walker_off, shared_files

from tracekit import _native
from tracekit.ingest import xplane

REPO_TRACE = Path(__file__).parent / "data" / "jax" / "scan_rnn.xplane.pb"
XSPACE = [REPO_TRACE, *shared_files("**/*.xplane.pb")]
pytestmark = pytest.mark.skipif(_native.xplane_walker() is None, reason="the C event walker is not built")


def _key(path: Path) -> str:
    return str(path.relative_to(TRACES)) if path.is_relative_to(TRACES) else path.name


def _read_through_python(path: Path, monkeypatch: pytest.MonkeyPatch) -> pa.Table:
    return read_with_walker_off(monkeypatch, "xplane_walker", xplane.read, path)


@pytest.mark.parametrize("path", XSPACE, ids=[_key(p) for p in XSPACE])
def test_walker_matches_the_protobuf_objects(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    walked = xplane.read(path)
    python = _read_through_python(path, monkeypatch)
    assert differing_columns(walked, python) == []
    assert walked.schema.metadata == python.schema.metadata


def _edited_trace(tmp_path: Path) -> Path:
    """The JAX trace with odd events added to its host plane's python line."""
    xs = xplane.XSpace()
    xs.ParseFromString(REPO_TRACE.read_bytes())
    plane = next(p for p in xs.planes if p.name == "/host:CPU")
    line = plane.lines[0]
    names = {"note": 9001, "ratio": 9002, "big": 9003, "neg": 9004, "blob": 9005, "ref": 9006, "empty": 9007,
             "correlation_id": 9008, "step_num": 9009, "hlo_op": 9010, "kernel_details": 9011,
             "bytes_allocated": 9012, "grid:1,2,3 block:32,1,1 regs:40 shm:128": 9013, "dup_a": 9014}
    for name, sid in names.items():
        plane.stat_metadata[sid].id = sid
        plane.stat_metadata[sid].name = name
    plane.stat_metadata[9015].name = "dup_a"  # a second id with the same name: one key in args
    plane.event_metadata[8001].name = "odd_event"
    plane.event_metadata[8002].name = "MemoryAllocation"
    plane.event_metadata[8003].name = "with_meta_stats"
    meta_stat = plane.event_metadata[8003].stats.add(metadata_id=9001)
    meta_stat.str_value = "from metadata"

    def event(mid: int, offset: int = 1_000, duration: int = 2_500, **stats: object) -> object:
        ev = line.events.add(metadata_id=mid, duration_ps=duration)
        ev.offset_ps = offset
        for key, value in stats.items():
            sid, field = key.rsplit("__", 1)
            st = ev.stats.add(metadata_id=names.get(sid, int(sid) if sid.isdigit() else 0))
            if field != "none":
                setattr(st, f"{field}_value", value)
        return ev

    event(8001, note__str="caf\u00e9 \u2603 \U0001f680 \x01\x1f\x7f\"\\ tab\t", ratio__double=1.5, big__uint64=2**64 - 1,
          neg__int64=-(2**63))
    for value in (math.nan, math.inf, -math.inf, -0.0, 1e300, 5e-324, 0.1 + 0.2):
        event(8001, ratio__double=value)
    event(8001, blob__bytes=bytes(range(256)) * 20, empty__none=None)
    event(8001, blob__bytes=b"", ref__ref=names["note"])
    event(8001, ref__ref=424242)                        # a reference to no stat: ""
    event(8001, **{"77777__int64": 5})                  # a stat id the plane does not name
    event(8001, dup_a__int64=1, note__str="x", **{"9015__int64": 2})  # same name twice: first place, last value
    event(8001, correlation_id__uint64=42, note__str="api")
    event(8001, correlation_id__str="not a number")
    event(8001, step_num__int64=7)                      # a TraceMe step
    event(8001, hlo_op__str="fusion.1")
    event(8001, kernel_details__str="grid:4,5,6 block:64,1,1 regs:32 shm:0")
    event(8001, kernel_details__ref=names["grid:1,2,3 block:32,1,1 regs:40 shm:128"])
    event(8002, bytes_allocated__int64=4096)
    event(8002, bytes_allocated__uint64=2**63 + 5)      # beyond int64: no bytes
    event(8001, offset=-1_500, duration=-1)             # floor division of negative picoseconds
    repeat = event(8001, note__str="counted")
    repeat.num_occurrences = 12
    line.events.add(metadata_id=8001).num_occurrences = 3
    event(8003)                                         # its metadata's stats only
    event(8003, ratio__double=2.0)                      # metadata stats and its own
    out = tmp_path / "edited.xplane.pb"
    out.write_bytes(xs.SerializeToString())
    return out


def test_walker_writes_odd_events_as_the_python_reader_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _edited_trace(tmp_path)
    walked = xplane.read(path)
    assert differing_columns(walked, _read_through_python(path, monkeypatch)) == []
    odd = walked.filter(pa.compute.equal(walked["name"].cast(pa.string()), "odd_event"))
    args = [a or "" for a in odd["args"].to_pylist()]
    assert any('"note":"caf\\u00e9 \\u2603 \\ud83d\\ude80 \\u0001\\u001f\\u007f\\"\\\\ tab\\t"' in a for a in args)
    assert any('"big":18446744073709551615' in a and '"neg":-9223372036854775808' in a for a in args)
    assert {'{"ratio":NaN}', '{"ratio":Infinity}', '{"ratio":-0.0}', '{"ratio":5e-324}', '{"ratio":0.30000000000000004}'} <= set(args)
    assert any(a.startswith('{"blob":{"bytes_b64":"AAECAw') and '"size":5120},"empty":null}' in a for a in args)
    assert '{"dup_a":2,"note":"x"}' in args and '{"ref":""}' in args and '{"note":"counted","@num_occurrences":12}' in args
    assert '{"@num_occurrences":3}' in args
    rows = odd.to_pylist()
    assert [r["correlation_id"] for r in rows if r["args"] == '{"note":"api"}'] == [42]
    assert any(r["kind"] == "step" and r["step"] is not None for r in walked.to_pylist() if r["name"] == "odd_event")
    assert [(r["grid_x"], r["block_x"], r["registers_per_thread"]) for r in rows if r["grid_x"] is not None] == \
        [(4, 64, 32), (1, 32, 40)]
    memory = walked.filter(pa.compute.equal(walked["name"].cast(pa.string()), "MemoryAllocation")).to_pylist()
    assert [r["bytes"] for r in memory if r["args"] and "bytes_allocated" in r["args"]] == [4096, None]
