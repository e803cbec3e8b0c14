"""Graph message passing by per-edge tensors: gather node rows to the edges, scatter them back.

A graph neural network layer in PyTorch Geometric's default form (``edge_index``, a ``[2, E]`` list of
edges) copies a row of node features to every edge (``x.index_select(0, edge_index[0])``: an
``E x F`` tensor of messages), weighs them per edge, and sums them into the target nodes
(``scatter_add_``); its backward does the same the other way. With E ten times the nodes, most of
the step moves E x F tensors through memory. Passed the graph as a sparse adjacency matrix instead
(``torch_geometric.utils.to_torch_csr_tensor``, ``T.ToSparseTensor()``), the layers that sum
neighbours (GCNConv, SAGEConv, GINConv, GraphConv) aggregate with one sparse-dense product and make
no per-edge tensor. PyTorch 2.13, PyG 2.8.1, 2-core AMD EPYC, 2 threads, a 20,000-node,
200,000-edge graph, two 64-wide layers, Adam (medians of 8-10 steps, 2-3 runs): a training step of
GCN took 108-120 ms with ``edge_index``, 40-44 ms with the CSR adjacency; GraphSAGE 89-105 against
21-29 ms; GIN 90-108 against 33-36 ms; GAT (which still weighs each edge by attention) 219-220
against 154-202 ms. Embedding rows gathered and summed per bag the same way (``index_select``, then
``index_add_``) are what ``nn.EmbeddingBag`` does in one op: 4,096 bags of 50 lookups from a
100,000 x 64 table, 52-53 ms a training step against 15 ms.

The evidence (CPU-only PyTorch traces with shapes recorded; on a GPU the host's op time is
launching): in the forward (no backward node around it) a gather of E rows from a node table
(``aten::index_select`` along dim 0, or ``aten::gather``) and a scatter of E rows of the same width
into N rows (``scatter_add_``, ``scatter_reduce_``, ``index_add_``, ``index_reduce_``, in place or
not), E > N; no matrix product of the forward takes an E-row input (EdgeConv's or NNConv's per-edge
MLP: there each edge's message needs its own product, which a sparse product does not replace); and
the ops on E-row tensors (the gathers, the per-edge weighting, the scatters and their backward) take
``MIN_SHARE`` of the steps' time. An embedding lookup gathers rows too, but scatters only in its
backward.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from tracekit.analyze.breakdown import op_self_time
from tracekit.analyze.frame import BACKWARD_NODE, GPU_BUSY_KINDS, Frame, calls_in_steps
from tracekit.analyze.top_ops import args_text, input_dims
from tracekit.ingest.links import member_mask, nearest_ancestor

GATHER_OPS = ("aten::index_select", "aten::gather")
SCATTER_OPS = ("aten::scatter_add_", "aten::scatter_add", "aten::scatter_reduce_", "aten::scatter_reduce",
               "aten::index_add_", "aten::index_add", "aten::index_reduce_", "aten::index_reduce")
PRODUCT_OPS = re.compile(r"^aten::(mm|addmm|matmul|linear|bmm|baddbmm|_addmm_activation)$")
EXP_OPS = re.compile(r"^aten::exp_?$")  # an edge softmax's exponent (GATConv's attention weights)
MIN_SHARE = 0.3  # of the steps' time in ops on per-edge tensors
MAX_CALLS = 20_000  # gather and scatter calls read; a trace with more is read in part


@dataclass(frozen=True)
class MessagePassing:
    """Per-edge messages in the steps used (module doc): ``edges`` rows gathered from a table of
    ``table_rows`` and scattered into ``nodes`` rows, ``width`` features a row (the widest pair), by
    ``gather`` and ``scatter`` (op names); ``share``: the ops on per-edge tensors, of the steps' time;
    ``attention``: the forward exponentiates per-edge scores (an edge softmax). A table of other rows
    than the scatter's is a bipartite graph (a sampled subgraph) or an embedding table summed per bag."""

    edges: int
    nodes: int
    width: int
    gather: str
    scatter: str
    share: float
    attention: bool = False
    table_rows: int = 0

    @property
    def graph(self) -> bool:
        """Whether rows go from nodes to the same nodes (a graph's message passing, for certain)."""
        return self.table_rows in (0, self.nodes)

    def evidence(self) -> str:
        weights = (" (with an attention weight per edge, aten::exp of per-edge scores: an edge softmax, which stays "
                   "per edge)" if self.attention else "")
        if self.graph:
            per_edge = ("the ops on per-edge tensors (gathers, per-edge weighting, scatters and their backward) take "
                        f"{self.share:.0%} of the step time")
            return (f"graph message passing by per-edge tensors: {self.gather} copies node rows to {self.edges:,} edges "
                    f"({self.edges:,} x {self.width:,} messages) and {self.scatter} sums them into {self.nodes:,} "
                    f"nodes{weights}; {per_edge}")
        return (f"rows gathered and summed back by per-row tensors: {self.gather} copies rows of a {self.table_rows:,}-row "
                f"table to {self.edges:,} rows ({self.edges:,} x {self.width:,}) and {self.scatter} sums them into "
                f"{self.nodes:,} rows{weights} (a bipartite graph's message passing, or embedding lookups summed per "
                f"bag); the ops on those per-row tensors (gathers, weighting, scatters and their backward) take "
                f"{self.share:.0%} of the step time")

    def remedy(self) -> str:
        graph = ("aggregate with a sparse adjacency matrix instead of per-edge messages: in PyTorch Geometric pass the "
                 "graph as a sparse tensor (torch_geometric.utils.to_torch_csr_tensor(edge_index.flip(0), size=(N, N)), "
                 "or the T.ToSparseTensor() transform), and GCNConv, SAGEConv, GINConv and GraphConv sum each node's "
                 "neighbours with one sparse-dense product, no E x F tensor (20,000 nodes, 200,000 edges, two 64-wide "
                 "layers, 2 threads: a training step of GCN 108-120 ms to 40-44 ms, GraphSAGE 89-105 to 21-29 ms, GIN "
                 "90-108 to 33-36 ms; GAT, which still weighs each edge, 219 to 154-202 ms)")
        if self.graph:
            return graph
        return (graph + "; embedding rows summed per bag: nn.EmbeddingBag (or F.embedding_bag with offsets) looks up "
                "and sums in one op (4,096 bags of 50 lookups from a 100,000 x 64 table: 52-53 ms a training step "
                "gathered and index_add_-ed, 15 ms as an EmbeddingBag)")

    def as_dict(self) -> dict[str, object]:
        return {"edges": self.edges, "nodes": self.nodes, "table_rows": self.table_rows, "width": self.width,
                "gather": self.gather, "scatter": self.scatter, "share": self.share, "attention": self.attention}


def message_passing(frame: Frame, used: list[int] | None) -> MessagePassing | None:
    """The steps' per-edge message passing (module doc), or None where the trace does not show it."""
    if "args" not in frame.table.column_names or frame.rows(*GPU_BUSY_KINDS).size:
        return None
    calls, steps = calls_in_steps(frame, GATHER_OPS + SCATTER_OPS, used)
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    if not step_ns or not calls.size:
        return None
    backward_codes = [c for c, n in enumerate(frame.names) if BACKWARD_NODE.match(n)]
    in_backward = member_mask(frame.name_code, backward_codes) if backward_codes else np.zeros(len(frame), bool)
    calls = calls[np.lexsort((calls, frame.start[calls]))][:MAX_CALLS]  # the first in time, whatever the file's order
    forward = calls[nearest_ancestor(frame.parent, calls, in_backward) < 0]
    gathered: dict[tuple[int, int], tuple[int, str]] = {}  # (rows, width) -> (table rows, the op that gathered them)
    scattered: dict[tuple[int, int], tuple[int, str]] = {}  # (rows, width) -> (rows scattered into, op)
    for row, text in zip(forward.tolist(), args_text(frame.table, forward).to_pylist(), strict=True):
        name = frame.name(row)
        edge = _gathered(name, text) if name in GATHER_OPS else _scattered(name, text)
        if edge is None:
            continue
        if name in GATHER_OPS:
            gathered.setdefault(edge[:2], (edge[2], name))
        elif edge[0] > edge[2]:  # more messages than the rows they are summed into
            scattered.setdefault(edge[:2], (edge[2], name))
    pairs = [key for key in scattered if key in gathered]
    if not pairs:
        return None
    edge_rows = {rows for rows, _ in pairs}
    per_edge, forward_per_edge = _per_edge_ops(frame, steps, edge_rows, in_backward)
    if frame.named(forward_per_edge, PRODUCT_OPS).any():
        return None  # each edge's message needs its own matrix product: a sparse product does not replace it
    share = int(op_self_time(frame, per_edge).sum()) / step_ns
    if share < MIN_SHARE:
        return None
    edges, width = max(pairs, key=lambda p: (p[1], p[0]))
    nodes, scatter = scattered[(edges, width)]
    table_rows, gather = gathered[(edges, width)]
    return MessagePassing(edges=edges, nodes=nodes, width=width, gather=gather, scatter=scatter, share=share,
                          attention=bool(frame.named(forward_per_edge, EXP_OPS).any()), table_rows=table_rows)


def _per_edge_ops(frame: Frame, steps: np.ndarray, edge_rows: set[int], in_backward: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The steps' ATen ops with an input tensor of ``edge_rows`` rows, all and those of the forward."""
    aten = [c for c, n in enumerate(frame.names) if n.startswith("aten::")]
    ops = frame.rows("cpu_op")
    ops = ops[member_mask(frame.step[ops], frame.step[steps].tolist()) & member_mask(frame.name_code[ops], aten)]
    codes, texts = input_dims(frame.table, ops)
    per_edge_text = np.array([_has_rows(t, edge_rows) for t in texts], bool)
    per_edge = ops[per_edge_text[codes]]
    return per_edge, per_edge[nearest_ancestor(frame.parent, per_edge, in_backward) < 0]


def _has_rows(dims_text: str, rows: set[int]) -> bool:
    try:
        dims = json.loads(dims_text) if dims_text else []
    except ValueError:
        return False
    return isinstance(dims, list) and any(isinstance(d, list) and d and isinstance(d[0], int) and d[0] in rows for d in dims)


def _inputs(text: str) -> tuple[list[object], list[object]] | None:
    """One op's Input Dims and Concrete Inputs (the latter [] where not recorded)."""
    try:
        args = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(args, dict) or not isinstance(args.get("Input Dims"), list):
        return None
    concrete = args.get("Concrete Inputs")
    return args["Input Dims"], concrete if isinstance(concrete, list) else []


def _along_rows(concrete: list[object], ndim: int) -> bool:
    """Whether the op's dim argument (its second input) is the rows' dim, 0 or -ndim; True where the
    value was not recorded."""
    if len(concrete) < 2 or concrete[1] in ("", None):
        return True
    try:
        return int(str(concrete[1])) in (0, -ndim)
    except ValueError:
        return False


def _matrix(dims: object) -> tuple[int, int] | None:
    """(rows, width) of a tensor of 2 or more dims, width the product of the rest."""
    if not isinstance(dims, list) or len(dims) < 2 or not all(isinstance(d, int) and d > 0 for d in dims):
        return None
    return dims[0], int(np.prod(dims[1:]))


def _gathered(name: str, text: str) -> tuple[int, int, int] | None:
    """(rows, width, table rows) of a gather: ``index_select(table [N, F], 0, index [E])`` or
    ``gather(table [N, F], 0, index [E, F])``."""
    found = _inputs(text)
    if found is None:
        return None
    dims, concrete = found
    if len(dims) < 3:
        return None
    table, index = _matrix(dims[0]), dims[2]
    if table is None or not isinstance(index, list) or not index or not isinstance(index[0], int):
        return None
    if not _along_rows(concrete, len(dims[0])):  # type: ignore[arg-type]
        return None
    if name == "aten::index_select":
        return (index[0], table[1], table[0]) if len(index) == 1 else None
    out = _matrix(index)
    return (out[0], out[1], table[0]) if out is not None and out[1] == table[1] else None


def _scattered(name: str, text: str) -> tuple[int, int, int] | None:
    """(rows, width, rows scattered into) of a scatter: ``scatter_add_(out [N, F], 0, index, src [E, F])``,
    ``index_add_(out [N, F], 0, index [E], src [E, F])`` and the reduce forms."""
    found = _inputs(text)
    if found is None:
        return None
    dims, concrete = found
    if len(dims) < 4:
        return None
    out, src = _matrix(dims[0]), _matrix(dims[3])
    if out is None or src is None or out[1] != src[1] or not _along_rows(concrete, len(dims[0])):  # type: ignore[arg-type]
        return None
    return src[0], src[1], out[0]
