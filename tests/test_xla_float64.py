"""An XLA program's float64 products, read from the HLO modules in the trace (tracekit.ingest.hlo's
instruction_facts, tracekit.analyze.float64's xla_float64_products): real jax.profiler captures of an MLP's
training step under jax_enable_x64, in float64 and cast to float32 (tests/data/jax/make_float64.py)."""

from __future__ import annotations

import json
from pathlib import Path

import tracekit
from tracekit import api
from tracekit.analyze.classify import classify_rows
from tracekit.analyze.float64 import xla_float64_products
from tracekit.analyze.frame import frame_of
from tracekit.ingest import load
from tracekit.ingest.columns import trace_extra
from tracekit.ingest.xplane import HLO_FLOAT64

DATA = Path(__file__).parent / "data" / "jax"


def test_float64_products_are_read_from_the_hlo_and_told() -> None:
    """2.30 ms a step in float64 against 1.06 ms in float32 (unprofiled); the report read "CPU
    compute-bound: look at the op breakdown"."""
    path = DATA / "float64_mlp.xplane.pb"
    table = load(path)
    listed = trace_extra(table)[HLO_FLOAT64]
    assert len(listed) == 1 and next(iter(listed)).startswith("jit_step#") and len(next(iter(listed.values()))) >= 6
    launch = tracekit.report(table).launch
    found = launch.xla_float64
    assert found is not None and found.source == "jax" and found.instructions >= 6 and found.share > 0.2
    assert found.program_share > found.share
    assert launch.remedies[0].startswith("compute in float32 where its precision holds: with jax_enable_x64 on")
    assert json.loads(api.render(api.report(table), "json"))["xla_float64"]["instructions"] == found.instructions


def test_the_same_step_in_float32_is_not_told() -> None:
    table = load(DATA / "float32_mlp.xplane.pb")
    assert HLO_FLOAT64 not in trace_extra(table)
    frame = frame_of(table)
    assert xla_float64_products(frame, classify_rows(frame), None) is None
