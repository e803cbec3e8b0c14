"""Gradients all-reduced one tensor at a time after the backward pass (tracekit/analyze/gradient_sync.py):
rank 0 of real 2-rank gloo captures of hand-written data parallelism, per tensor, with one flat
buffer, and with metrics all-reduced beside it (tests/data/cpu/make_gradient_sync.py); DDP, FSDP and tensor-parallel captures have none."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracekit
from tracekit.analyze.frame import frame_of
from tracekit.analyze.gradient_sync import gradient_sync
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"


def test_per_tensor_all_reduces_are_told_first() -> None:
    """The step was "communication-bound" with the rule's general remedy (overlap, bucket_cap_mb, no_sync,
    compression): nothing said that it issues 18 all-reduces a step, one a gradient, 2.2x the time of one
    flat all-reduce unprofiled."""
    launch = tracekit.report(DATA / "gradient_sync_per_tensor_rank0.pt.trace.json.gz").launch
    found = launch.gradient_sync
    assert found is not None and found.per_step == 18 and found.elements == 1408, found
    assert found.share > 0.3
    assert launch.remedies[0].startswith("all-reduce the gradients together"), launch.remedies
    assert "gradient_sync" in launch.findings()


def test_one_flat_all_reduce_is_not_told() -> None:
    assert tracekit.report(DATA / "gradient_sync_flat_rank0.pt.trace.json.gz").launch.gradient_sync is None


def test_metrics_all_reduced_after_the_backward_are_not_gradients() -> None:
    """The flat all-reduce, then 10 0-dim metrics averaged over the ranks, one call each: 11 calls after
    the backward pass, of which only the flat one is of gradients' size."""
    frame = frame_of(load(DATA / "gradient_sync_metrics_rank0.pt.trace.json.gz"))
    calls = [r for r in frame.rows("cpu_op").tolist() if frame.name(r) == "c10d::allreduce_"]
    assert len(calls) == 4 * 11
    assert gradient_sync(frame, None) is None


@pytest.mark.parametrize("name", ["ddp_gloo_rank0", "ddp_straggler_rank0", "ddp_accumulation_rank0", "fsdp_units_rank0",
                                  "fsdp_fsdp1_units_rank0", "fsdp_ddp_rank0"])
def test_ddp_and_fsdp_are_not_told(name: str) -> None:
    assert gradient_sync(frame_of(load(DATA / f"{name}.pt.trace.json.gz")), None) is None


def test_all_reduces_inside_the_backward_are_not_counted() -> None:
    """HTA's df_index_resolver sample all-reduces 404 times a step inside CompiledFunctionBackward (a
    model's own collectives), and its ns_resolution sample inside AccumulateGrad hooks: neither is a
    loop after the backward pass."""
    for path in ("hta/df_index_resolver/df_index_resolver.json.gz",
                 "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"):
        if not (SHARED / path).exists():
            pytest.skip(f"../shared/traces/{path} is absent")
        assert gradient_sync(frame_of(load(SHARED / path)), None) is None
