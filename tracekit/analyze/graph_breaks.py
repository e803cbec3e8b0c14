"""A torch.compile'd function split by graph breaks.

Where Dynamo cannot trace a line (``float(t)``, ``t.item()``, ``print``, a call it does not support,
Python control flow on a tensor's value) it compiles the code before it as one graph, runs the line
eagerly, and compiles what follows as a resume function: each call then runs several graphs with
eager code between them, a guard check before each, no fusion across the break, and on a GPU a sync
wherever the eager code reads a value. torch.profiler names each graph's call ``Torch-Compiled
Region: F/C`` (frame F, compile C), and a resume function's region runs *inside* its caller's: a
region nested in another is a graph break. Two compiled functions called one after the other are
not nested.

The evidence: in half or more of the steps used, an outermost compiled region whose nest of regions
calls two or more compiled graphs (``## Call CompiledFxGraph``); regions that only call into the next
(a compiled optimizer step's wrappers) split nothing. The eager ops run directly inside the regions,
between the graphs, are named.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from tracekit.analyze.frame import Frame
from tracekit.ingest.links import member_mask, nearest_ancestor

REGION = re.compile(r"^Torch-Compiled Region: \d+/\d+$")
COMPILED_GRAPH = re.compile(r"^## Call CompiledFxGraph")


@dataclass(frozen=True)
class GraphBreaks:
    """Graph breaks in the steps used. graphs: regions an outermost call runs (the most); between: the
    eager ops run between its graphs, most frequent first (names)."""

    graphs: int
    between: list[str]

    def evidence(self) -> str:
        eager = f"; between them, eagerly: {', '.join(self.between[:3])}" if self.between else ""
        return (f"the compiled function runs as {self.graphs} graphs a call (Torch-Compiled Regions nested in one "
                f"another: graph breaks){eager}: each break costs a guard check and a graph call, and no fusion "
                "crosses it")

    def remedy(self) -> str:
        return ("remove the graph breaks: TORCH_LOGS=graph_breaks (or torch._dynamo.explain(fn)(*args)) names each "
                "one and its line; .item() / float(tensor), print and data-dependent Python control flow are the "
                "usual ones (keep the value a tensor, move logging out of the compiled function); "
                "torch.compile(fullgraph=True) turns any left into an error")

    def as_dict(self) -> dict[str, object]:
        return {"graphs": self.graphs, "between": self.between}


def graph_breaks(frame: Frame, used: list[int] | None) -> GraphBreaks | None:
    """The steps' compiled calls split by graph breaks (module doc), or None."""
    codes = [c for c, n in enumerate(frame.names) if REGION.match(n)]
    if not codes:
        return None
    regions = np.flatnonzero(member_mask(frame.name_code, codes))
    if used is not None:
        regions = regions[member_mask(frame.step[regions], used)]
    if not regions.size:
        return None
    is_region = np.zeros(len(frame), bool)
    is_region[regions] = True
    # Each region's outermost region (itself at the top; a resume function can break again, nesting deeper).
    outermost = regions.copy()
    while True:
        up = nearest_ancestor(frame.parent, outermost, is_region)
        if not (up >= 0).any():
            break
        outermost = np.where(up >= 0, up, outermost)
    # A region that calls a compiled graph of its own; frames that only call into the next (a compiled
    # optimizer step's wrappers around torch.optim's step) run no graph and split nothing.
    graph_codes = [c for c, n in enumerate(frame.names) if COMPILED_GRAPH.match(n)]  # a range, not an op
    graph_calls = np.flatnonzero(member_mask(frame.name_code, graph_codes))
    with_graph = member_mask(regions, np.unique(frame.parent[graph_calls]).tolist())
    graphs = Counter(outermost[with_graph].tolist())
    split = [outer for outer, n in graphs.items() if n >= 2]
    if not split or np.unique(frame.step[np.array(split)]).size * 2 < np.unique(frame.step[regions]).size:
        return None
    # Eager ops between the graphs: ops whose parent is a region (not inside a compiled graph's call).
    children = frame.rows("cpu_op")
    children = children[member_mask(frame.parent[children], regions.tolist())]
    children = children[~frame.named(children, REGION) & ~frame.named(children, COMPILED_GRAPH)]
    counts = Counter(frame.name(int(r)) for r in children)  # ties by name: not by the file's order of events
    between = [n for n, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
               if not n.startswith(("TorchDynamo", "Pregraph", "AOTDispatcher"))]
    return GraphBreaks(graphs=max(graphs.values()), between=between)

