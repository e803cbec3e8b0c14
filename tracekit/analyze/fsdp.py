"""FSDP's collectives in a step: what sharding the model costs in communication.

FSDP (``fully_shard``, FSDP2; ``FullyShardedDataParallel``, FSDP1) all-gathers each sharded unit's
parameters before its forward, again before its backward where it resharded them after the forward
(FSDP2's ``reshard_after_forward=True``, FSDP1's ``FULL_SHARD``: the defaults), and reduce-scatters
each unit's gradients: two or three collectives per unit and step, each paying its latency, where
DDP all-reduces the gradients in a few buckets. The DDP remedies (``bucket_cap_mb``, ``no_sync()``)
do not apply. PyTorch 2.13, a 7-layer MLP (512 wide, batch 64) trained on 2 CPU ranks (gloo, one
thread each), medians of 30 steps, 2 runs: 64-74 ms a step with each layer a unit, 65-66 ms with
``reshard_after_forward=False``, 33-38 ms with the whole model one unit, 21-24 ms under DDP.

Read from the trace: FSDP2's ranges (``FSDP::pre_forward`` per unit, ``FSDP::all_gather``,
``FSDP::post_backward_reduce``), FSDP1's (``FullyShardedDataParallel._pre_forward`` per unit) and
c10d's all-gather and reduce-scatter ops, counted in the steps used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tracekit.analyze.frame import Frame, step_rows
from tracekit.ingest.links import member_mask

# One range per unit's forward: FSDP2 names it "FSDP::pre_forward (<module's name>)" (the root without one).
_UNIT_FORWARD = re.compile(r"^(FSDP::pre_forward( \(.*\))?|FullyShardedDataParallel\._pre_forward)$")
_GATHER_RANGE = re.compile(r"^FSDP::all_gather( \(.*\))?$")
_REDUCE_RANGE = re.compile(r"^FSDP::post_backward_reduce( \(.*\))?$")
_GATHER_OPS = re.compile(r"^c10d::(_allgather_base_|allgather_|allgather_into_tensor_coalesced_|"
                         r"_allgather_into_tensor_coalesced_)$")
_REDUCE_SCATTER_OPS = re.compile(r"^c10d::(_reduce_scatter_base_|reduce_scatter_|reduce_scatter_tensor_coalesced_)$")


@dataclass(frozen=True)
class FsdpCollectives:
    """A step's FSDP units and collectives (means over the steps used, rounded)."""

    units: int
    gathers: int
    reduce_scatters: int

    def says(self) -> str:
        again = self.gathers - self.units
        regathered = f", {again} again for the backward" if again > 0 else ""
        return (f"FSDP: {self.units} sharded unit{'s' if self.units > 1 else ''}, {self.gathers} all-gathers of parameters "
                f"a step (one per unit for its forward{regathered}) and {self.reduce_scatters} reduce-scatters of "
                "gradients")

    def remedy(self) -> str:
        keep = ("keep each unit's parameters gathered from its forward to its backward "
                "(fully_shard(..., reshard_after_forward=False); FSDP1: ShardingStrategy.SHARD_GRAD_OP), "
                if self.gathers > self.units else "")
        return ("the step waits on FSDP's collectives, a few per sharded unit, each paying its latency: "
                f"{keep}shard fewer, larger units (each fully_shard call is its own all-gather and reduce-scatter), "
                "accumulate micro-batches without reducing (FSDP2: model.set_requires_gradient_sync(False) but on the "
                "last; FSDP1: no_sync()), or where the model, its gradients and optimizer state fit on each rank, "
                "train with DDP (a few bucketed all-reduces overlapped with the backward) (a 7-layer 512-wide MLP on 2 "
                "CPU ranks over gloo: 64-74 ms a step with each layer a unit, 65-66 ms without resharding after the "
                "forward, 33-38 ms as one unit, 21-24 ms under DDP). A collective also waits for the slowest rank: "
                "`tracekit ingest` the ranks' traces into a dataset: its report names the rank that joins "
                "last")


def fsdp_collectives(frame: Frame, used: list[int] | None) -> FsdpCollectives | None:
    """The steps' FSDP units and collectives (module doc), or None where no FSDP unit runs in them."""
    rows = frame.rows("cpu_op", "user_range")  # FSDP's ranges are record_function ranges
    if used is not None:
        rows = rows[member_mask(frame.step[rows], used)]
    steps = max(step_rows(frame, used).size, 1)

    def per_step(pattern: re.Pattern[str]) -> float:
        codes = [c for c, n in enumerate(frame.names) if pattern.match(n)]
        return int(member_mask(frame.name_code[rows], codes).sum()) / steps if codes else 0.0

    units = per_step(_UNIT_FORWARD)
    if units < 0.5:
        return None
    gathers = max(per_step(_GATHER_RANGE), per_step(_GATHER_OPS))
    reduces = max(per_step(_REDUCE_RANGE), per_step(_REDUCE_SCATTER_OPS))
    return FsdpCollectives(units=round(units), gathers=round(gathers), reduce_scatters=round(reduces))
