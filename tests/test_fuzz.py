"""Property-based fuzzing: mutated real files end in InputError or in a valid table, never another exception."""

from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

import pytest
from conftest import TRACES, needs_shared
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_all_traces import check_table

import tracekit

SOURCES = {
    "kineto": TRACES / "hta" / "trace_compare" / "base" / "base.json.gz",
    "xspace": TRACES / "xprof" / "cpu_tf2.21" / "lstm_raw_blocklstm_fn.xplane.pb",
    "nsys": TRACES / "nsys" / "dlprof_pytorch_cnn_rtx2070s_nsys2022.1.sqlite",
    "xprof-json": TRACES / "xprof" / "cpu_tf2.21" / "lstm_keras_bf16_fn.trace_viewer.json.gz",
}


def original(kind: str) -> bytes:
    data = SOURCES[kind].read_bytes()
    return gzip.decompress(data) if kind in ("kineto", "xprof-json") else data


@st.composite
def mutations(draw, size: int):
    ops = draw(st.lists(st.tuples(st.sampled_from(["flip", "set", "cut", "insert", "delete"]),
                                  st.integers(0, max(size - 1, 0)), st.binary(min_size=1, max_size=8)),
                        min_size=1, max_size=4))
    return ops


def mutate(data: bytes, ops) -> bytes:
    b = bytearray(data)
    for op, pos, blob in ops:
        pos = min(pos, max(len(b) - 1, 0))
        if not b:
            break
        if op == "flip":
            b[pos] ^= blob[0] or 1
        elif op == "set":
            b[pos:pos + len(blob)] = blob
        elif op == "cut":
            del b[pos:]
        elif op == "insert":
            b[pos:pos] = blob
        else:
            del b[pos:pos + len(blob)]
    return bytes(b)


def run_one(kind: str, data: bytes) -> None:
    suffix = {"kineto": ".json", "xspace": ".xplane.pb", "nsys": ".sqlite", "xprof-json": ".json"}[kind]
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / f"fuzz{suffix}"
        p.write_bytes(data)
        try:
            table = tracekit.load(p)
        except tracekit.InputError as e:
            assert str(p) in str(e)
            return
        check_table(table)


def fuzz_settings(n: int):
    return settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@needs_shared
@pytest.mark.parametrize("kind", ["kineto", "xspace", "nsys", "xprof-json"])
def test_mutated_real_files_fail_cleanly_or_parse(kind):
    data = original(kind)

    @fuzz_settings(60 if kind not in ("nsys", "xprof-json") else 30)
    @given(mutations(len(data)))
    def check(ops):
        run_one(kind, mutate(data, ops))

    check()


@needs_shared
def test_mutated_kineto_json_text_structure():
    """Mutations aimed at JSON structure: swap in structural characters at random places."""
    data = original("kineto")

    @fuzz_settings(80)
    @given(st.lists(st.tuples(st.integers(0, len(data) - 1), st.sampled_from(list(b'{}[]",:\\ 0-e.'))), min_size=1, max_size=3))
    def check(edits):
        b = bytearray(data)
        for pos, ch in edits:
            b[pos] = ch
        run_one("kineto", bytes(b))

    check()
