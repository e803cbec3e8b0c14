"""Rows gathered and summed back by per-row tensors (tracekit/analyze/message_passing.py): a graph
network's message passing by edge_index, and embedding lookups summed per bag by hand. Real captures
of PyTorch Geometric layers and of plain PyTorch (tests/data/cpu/make_message_passing.py), beside the
same work done with a sparse product or an EmbeddingBag, which get nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracekit
from tracekit.analyze.frame import frame_of
from tracekit.analyze.message_passing import message_passing
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def _frame(name: str):
    return frame_of(load(DATA / f"{name}.pt.trace.json.gz"))


def test_gcn_messages_by_edge_index_are_found_with_their_sizes() -> None:
    found = message_passing(_frame("message_passing_gcn"), None)
    assert found is not None
    # 200,000 random edges and 20,000 self loops, less the random edges that were loops already.
    assert (found.edges, found.nodes, found.table_rows, found.width) == (219_988, 20_000, 20_000, 64)
    assert (found.gather, found.scatter, found.graph, found.attention) == ("aten::index_select", "aten::scatter_add_", True, False)
    assert 0.5 < found.share < 0.95, found.share
    report = tracekit.report(_frame("message_passing_gcn").table)
    launch = report.launch
    said = next(e for e in launch.evidence if e.startswith("graph message passing by per-edge tensors"))
    assert "to 219,988 edges (219,988 x 64 messages)" in said and "into 20,000 nodes" in said, said
    # Before: only "look at the op breakdown (GEMM share, casts) and the thread count".
    assert found.remedy() in launch.remedies and "to_torch_csr_tensor" in found.remedy()
    assert launch.remedies.index(found.remedy()) < len(launch.remedies) - 1  # before the pointer to the tables
    assert tracekit.render(report, "json").count('"message_passing"') == 1


def test_an_edge_softmax_is_named() -> None:
    found = message_passing(_frame("message_passing_gat"), None)
    assert found is not None and found.graph and found.attention
    assert "an edge softmax, which stays per edge" in found.evidence()


@pytest.mark.parametrize("name", ["message_passing_gcn_sparse", "message_passing_edgeconv",
                                  "message_passing_embedding_bag", "embedding_dense", "embedding_sparse"])
def test_no_per_edge_messages_or_none_a_sparse_product_replaces(name: str) -> None:
    """A sparse adjacency (a sparse-dense product), EdgeConv's per-edge MLP (each message needs its own
    product), an EmbeddingBag, and embedding lookups whose rows are scattered back only in backward."""
    assert message_passing(_frame(name), None) is None
    assert "message_passing" not in tracekit.report(_frame(name).table).launch.findings()


def test_embedding_rows_summed_per_bag_by_hand_are_told_both_ways() -> None:
    """A 100,000-row table gathered to 204,800 rows and summed into 4,096: not a graph for certain
    (the table is not the rows summed into), so both fixes are named."""
    found = message_passing(_frame("message_passing_bags"), None)
    assert found is not None and not found.graph
    assert (found.edges, found.nodes, found.table_rows) == (204_800, 4096, 100_000)
    assert "rows of a 100,000-row table to 204,800 rows" in found.evidence()
    assert "nn.EmbeddingBag" in found.remedy() and "to_torch_csr_tensor" in found.remedy()


def test_a_live_capture_needs_its_shapes(tmp_path: Path) -> None:
    """A graph convolution written in plain PyTorch (no PyG), profiled for real: found with
    record_shapes=True; without shapes there is no evidence, and nothing is said."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    nodes, edges, width = 2000, 20_000, 32
    x = torch.randn(nodes, width)
    source, target = torch.randint(0, nodes, (2, edges))
    weight = torch.nn.Parameter(torch.randn(width, width) / width ** 0.5)
    norm = torch.rand(edges, 1)

    def step() -> None:
        h = x @ weight
        messages = h.index_select(0, source) * norm
        out = torch.zeros(nodes, width).scatter_add_(0, target.unsqueeze(1).expand(-1, width), messages)
        out.relu().sum().backward()

    found = {}
    for shapes in (True, False):
        path = tmp_path / f"shapes_{shapes}.json"
        with profile(activities=[ProfilerActivity.CPU], record_shapes=shapes, schedule=schedule(wait=0, warmup=1, active=2),
                     on_trace_ready=lambda p, path=path: p.export_chrome_trace(str(path))) as prof:
            for _ in range(3):
                step()
                prof.step()
        found[shapes] = message_passing(frame_of(load(path)), None)
    assert found[True] is not None and (found[True].edges, found[True].nodes, found[True].width) == (edges, nodes, width)
    assert found[False] is None
