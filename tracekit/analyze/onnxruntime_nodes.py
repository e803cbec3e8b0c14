"""What ONNX Runtime's own profiler adds to each node run it records.

With ``enable_profiling`` on, ORT times every node and then writes the node's event: its input and
output shapes, memory statistics and, for the thread pool, scheduling statistics it collects while
the node runs. That work lands inside each node's recorded time and in the gap before the next, a
fixed cost per node whatever the node computes. On this project's 2-core AMD EPYC (ORT 1.32, CPU
provider) it was 7-8 µs a node: a 4-node MLP (32x256 -> 512 -> 256) ran 105 µs unprofiled and 137
µs profiled; a 60-node model of 16-wide layers 27 µs and 470 µs, where its 16-element Adds recorded
6 µs each. A profile of small nodes is then mostly the profiler, and its split between "compute" and
"dispatch" says nothing of the unprofiled run.

The trace cannot separate that cost from the nodes' work, but it bounds it: no node run is shorter
than the fixed cost, and no gap between two runs either. ``node_floor`` takes the shortest of each
(their 5th percentiles, over the steps used) as the floor a node pays, and the share of the step the
node count times that floor makes: an upper bound on the fixed cost when the cheapest node still
computes something (the MLP: 22-40% estimated over four captures, 23% measured), close to it where the model has trivial
nodes (shape ops, small elementwise ones).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit.analyze.frame import Frame
from tracekit.ingest.links import member_mask

FLOOR_PERCENTILE = 5


@dataclass(frozen=True)
class NodeFloor:
    """The fixed cost per node run of an ORT profile, over the steps used."""

    nodes_per_step: float
    shortest_run_ns: float  # 5th percentile of the node runs' durations
    shortest_gap_ns: float  # 5th percentile of the gaps between consecutive node runs of one thread in a step
    median_gap_ns: float
    share: float  # node runs x (shortest run + shortest gap) over the steps' time
    between_share: float  # the gaps between node runs over the steps' time

    @property
    def floor_ns(self) -> float:
        return self.shortest_run_ns + self.shortest_gap_ns

    def as_dict(self) -> dict[str, object]:
        return {"node_runs_per_step": round(self.nodes_per_step, 2), "shortest_run_ns": round(self.shortest_run_ns),
                "shortest_gap_ns": round(self.shortest_gap_ns), "median_gap_ns": round(self.median_gap_ns),
                "floor_share_of_step": round(self.share, 4), "between_nodes_share_of_step": round(self.between_share, 4)}


def node_floor(frame: Frame, used: list[int] | None) -> NodeFloor | None:
    """The fixed cost per node of an ORT trace's steps (``used``: the step numbers judged; None: every
    marked step), or None where no step holds two node runs."""
    steps = frame.rows("step")
    if used is not None:
        steps = steps[member_mask(frame.step[steps], used)]
    step_ns = int(frame.dur[steps].sum())
    ops = frame.rows("cpu_op")
    ops = ops[(frame.op_parent[ops] < 0) & member_mask(frame.step[ops], frame.step[steps])]  # a subgraph's nodes run inside their node
    if not step_ns or ops.size < 2:
        return None
    thread = frame.table.column("tid").to_numpy(zero_copy_only=False)[ops]
    order = np.lexsort((frame.start[ops], frame.step[ops], thread))
    ops, thread = ops[order], thread[order]
    same = (thread[1:] == thread[:-1]) & (frame.step[ops[1:]] == frame.step[ops[:-1]])
    gaps = np.maximum(frame.start[ops[1:]] - frame.end[ops[:-1]], 0)[same]
    if not gaps.size:
        return None
    runs = frame.dur[ops]
    shortest_run = float(np.percentile(runs, FLOOR_PERCENTILE))
    shortest_gap = float(np.percentile(gaps, FLOOR_PERCENTILE))
    return NodeFloor(nodes_per_step=ops.size / max(steps.size, 1), shortest_run_ns=shortest_run,
                     shortest_gap_ns=shortest_gap, median_gap_ns=float(np.median(gaps)),
                     share=min(ops.size * (shortest_run + shortest_gap) / step_ns, 1.0),
                     between_share=min(float(gaps.sum()) / step_ns, 1.0))
