"""The C scanner parses one big events array on several threads and must give exactly what one
thread gives: same columns, same interned codes, same error at the same byte.

The cut points are guesses (a '{' after "}," and before a key); these tests lower the minimum
part size so that small real traces are cut in many places, and add events whose strings look
like cut points, so that every way a guess can be wrong is taken.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import ids, needs_shared, shared_files

from tracekit import _native

pytestmark = pytest.mark.skipif(_native.BACKEND != "c", reason="the C extension is not built here; the pure-Python scanner is serial")

KINETO = [p for p in shared_files("hta/**/*.json*") if "exports" not in p.parts]
SPLITS = [(2, 1), (3, 997), (8, 1), (64, 1)]  # (threads, min_part_bytes)


def _bytes(path: Path) -> bytes:
    raw = path.read_bytes()
    return gzip.decompress(raw) if path.suffix == ".gz" else raw


def _plain(r: dict) -> dict:
    """The scan result with its column buffers (read-only buffer objects) as bytes, to compare."""
    return {k: v if isinstance(v, (int, list)) else bytes(memoryview(v)) for k, v in r.items()}


def _scan(data: bytes, threads: int = 1, min_part: int = 1) -> dict | str:
    try:
        return _plain(_native.scanner.scan(data, False, threads, min_part))
    except ValueError as e:
        return f"ValueError: {e}"


def _seed() -> bytes:
    return _bytes(min(KINETO, key=lambda p: p.stat().st_size))


@needs_shared
@pytest.mark.parametrize("path", KINETO, ids=ids(KINETO))
def test_threads_give_the_serial_scan(path):
    data = _bytes(path)
    serial = _scan(data)
    assert isinstance(serial, dict) and serial["n"] > 0
    for threads, min_part in SPLITS:
        assert _scan(data, threads, min_part) == serial, (threads, min_part)


@needs_shared
def test_strings_that_look_like_event_starts_do_not_cut_an_event():
    doc = json.loads(_seed())
    events = doc["traceEvents"]
    for i, e in enumerate(events):
        if i % 3 == 0:
            # A string whose bytes read '},{"' and '}, {' (the quote closing the string).
            e["name"] = f'{e.get("name", "")}}},{{'
            e.setdefault("args", {})["note"] = '}, {"ph": "X"}, {'
    data = json.dumps(doc).encode()
    serial = _scan(data)
    assert isinstance(serial, dict)
    assert serial["n"] == len(events)
    for threads, min_part in SPLITS:
        assert _scan(data, threads, min_part) == serial, (threads, min_part)


@needs_shared
def test_top_level_keys_after_the_events_array():
    # Kineto writes deviceProperties before traceEvents; other writers put objects after it, and a
    # cut may land there, past the array's end.
    doc = json.loads(_seed())
    tail = {"deviceProperties": [{"id": i, "name": "GPU"} for i in range(2000)], "traceName": "x"}
    data = json.dumps({"traceEvents": doc["traceEvents"], **tail}).encode()
    serial = _scan(data)
    assert isinstance(serial, dict) and len(serial["header"]) == 2
    for threads, min_part in SPLITS:
        assert _scan(data, threads, min_part) == serial, (threads, min_part)


@needs_shared
def test_a_bare_events_array():
    # Chrome's other form: the document is the events array itself.
    data = json.dumps(json.loads(_seed())["traceEvents"]).encode()
    serial = _scan(data)
    assert isinstance(serial, dict) and serial["n"] > 0 and serial["header"] == []
    for threads, min_part in SPLITS:
        assert _scan(data, threads, min_part) == serial, (threads, min_part)


@needs_shared
def test_a_broken_file_fails_at_the_same_byte_on_any_number_of_threads():
    data = _seed()
    cuts = [len(data) * k // 23 for k in range(1, 23)]
    corrupt = bytearray(data)
    corrupt[len(data) * 2 // 3] = ord("\x01")  # a control byte: inside a string or between tokens
    cases = [data[:c] for c in cuts] + [bytes(corrupt), data.replace(b'"ph"', b'"ph" "', 1)]
    for case in cases:
        serial = _scan(case)
        assert isinstance(serial, str) and serial.startswith("ValueError"), serial
        for threads, min_part in SPLITS:
            assert _scan(case, threads, min_part) == serial, (threads, min_part, serial)


def test_a_big_array_is_cut_and_joined_in_file_order():
    # Enough events for the default 4 MiB parts: codes are interned in first-appearance order
    # across the parts, as one thread would.
    events = [{"ph": "X", "cat": "kernel" if i % 2 else "cpu_op", "name": f"op{i % 1000}", "pid": i % 3, "tid": 7,
               "ts": i * 1.5, "dur": 1, "args": {"correlation": i, "Sequence number": i}} for i in range(150_000)]
    data = json.dumps({"traceEvents": events}).encode()
    assert len(data) > 2 * (4 << 20)
    serial = _plain(_native.scanner.scan(data, False, 1))
    parallel = _plain(_native.scanner.scan(data, False, 4))
    assert parallel == serial
    assert parallel["name_values"][:3] == ["op0", "op1", "op2"]
