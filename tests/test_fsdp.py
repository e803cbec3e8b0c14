"""FSDP's collectives (tracekit/analyze/fsdp.py): a step that waits on FSDP's all-gathers and
reduce-scatters is told FSDP's remedies, not DDP's buckets and no_sync(). Real 2-rank captures over gloo
(tests/data/cpu/make_fsdp.py): the same MLP sharded in 7 units and under DDP."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracekit
from tracekit.analyze import verdicts
from tracekit.analyze.frame import frame_of
from tracekit.analyze.fsdp import FsdpCollectives, fsdp_collectives
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def test_fsdp_units_and_their_collectives_are_counted_and_told_fsdps_remedy() -> None:
    path = DATA / "fsdp_units_rank0.pt.trace.json.gz"
    assert fsdp_collectives(frame_of(load(path)), None) == FsdpCollectives(units=7, gathers=13, reduce_scatters=7)
    launch = tracekit.report(path).launch
    assert launch.verdict == "communication-bound"
    said = next(e for e in launch.evidence if e.startswith("collective communication"))
    assert "FSDP: 7 sharded units, 13 all-gathers of parameters a step (one per unit for its forward, 6 again for " \
           "the backward) and 7 reduce-scatters" in said, said
    # Before: DDP's "tune bucket_cap_mb ... gradient accumulation under no_sync()".
    assert verdicts.COMMUNICATION_REMEDY not in launch.remedies
    fix = launch.remedies[0]
    assert fix.startswith("the step waits on FSDP's collectives") and "reshard_after_forward=False" in fix, fix


def test_fsdp1_units_are_counted_by_its_own_names() -> None:
    """FSDP1 (FullyShardedDataParallel, FULL_SHARD) names its units' hooks FullyShardedDataParallel._pre_forward
    and runs c10d's allgather_ / _reduce_scatter_base_: the same 7 units and collectives."""
    path = DATA / "fsdp_fsdp1_units_rank0.pt.trace.json.gz"
    assert fsdp_collectives(frame_of(load(path)), None) == FsdpCollectives(units=7, gathers=13, reduce_scatters=7)


def test_no_regathering_means_no_reshard_advice() -> None:
    assert "reshard_after_forward" not in FsdpCollectives(units=3, gathers=3, reduce_scatters=3).remedy()


@pytest.mark.parametrize("name", ["fsdp_ddp_rank0", "ddp_gloo_rank0", "ddp_accumulation_rank0"])
def test_ddp_is_not_fsdp(name: str) -> None:
    assert fsdp_collectives(frame_of(load(DATA / f"{name}.pt.trace.json.gz")), None) is None
