"""Writes tests/data/cpu/message_passing_*.pt.trace.json.gz: real torch.profiler captures (CPU, 2 threads,
2 steps marked, shapes recorded) of rows gathered and summed back by per-row tensors, and of the same
work done without them.

Two-layer graph networks (PyTorch Geometric) trained with Adam on a random graph of 20,000 nodes and
200,000 edges, 64 features, 8 classes:
- message_passing_gcn: GCNConv given edge_index: index_select copies node rows to the edges (219,990
  with the self loops), scatter_add_ sums them into the nodes.
- message_passing_gat: GATConv (4 heads) given edge_index: the same, with an edge softmax (aten::exp of
  per-edge scores).
- message_passing_gcn_sparse: GCNConv given the CSR adjacency (to_torch_csr_tensor): a sparse-dense
  product, no per-edge messages.
- message_passing_edgeconv: EdgeConv, whose per-edge MLP (a matrix product on the E x 2F messages)
  a sparse product cannot replace.
Embedding lookups summed per bag (plain PyTorch: 4,096 bags of 50 lookups from a 100,000 x 64 table, a
linear head, SGD):
- message_passing_bags: index_select from the table, index_add_ into the bags.
- message_passing_embedding_bag: nn.EmbeddingBag(mode="sum") with offsets.

    python tests/data/cpu/make_message_passing.py   # needs torch_geometric (made with 2.8.1), not a tracekit dependency
Made with torch 2.13.0 (CPU build) on a 2-core AMD EPYC (Zen 4: AVX-512 with BF16, no AMX).
"""

import torch
import torch.nn.functional as F
from profiled import unprofiled_ms, write_capture
from torch_geometric.nn import EdgeConv, GATConv, GCNConv
from torch_geometric.utils import to_torch_csr_tensor

NODES, EDGES, WIDTH = 20_000, 200_000, 64


def capture_graph(name: str, layer, sparse: bool) -> None:
    torch.manual_seed(0)
    x = torch.randn(NODES, WIDTH)
    edge_index = torch.randint(0, NODES, (2, EDGES))
    y = torch.randint(0, 8, (NODES,))
    graph = to_torch_csr_tensor(edge_index.flip(0), size=(NODES, NODES)) if sparse else edge_index

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first, self.second = layer(WIDTH, 64), layer(64, 8)

        def forward(self, x: torch.Tensor, graph: torch.Tensor) -> torch.Tensor:
            return self.second(F.relu(self.first(x, graph)), graph)

    model = Net()
    opt = torch.optim.Adam(model.parameters(), 1e-2)

    def step(_: int) -> None:
        opt.zero_grad()
        F.cross_entropy(model(x, graph), y).backward()
        opt.step()

    print(f"{name}: {unprofiled_ms(step, 5):.1f} ms a step unprofiled")
    write_capture(name, step, active=2, record_shapes=True)


def capture_bags(name: str, fused: bool) -> None:
    torch.manual_seed(0)
    table_rows, bags, lookups = 100_000, 4096, 50
    index = torch.randint(0, table_rows, (bags * lookups,))
    bag_of = torch.arange(bags).repeat_interleave(lookups)
    offsets = torch.arange(0, bags * lookups, lookups)
    table = torch.nn.EmbeddingBag(table_rows, WIDTH, mode="sum") if fused else torch.nn.Embedding(table_rows, WIDTH)
    head = torch.nn.Linear(WIDTH, 1)
    opt = torch.optim.SGD([*table.parameters(), *head.parameters()], 0.01)

    def summed() -> torch.Tensor:
        if fused:
            return table(index, offsets)
        return torch.zeros(bags, WIDTH).index_add_(0, bag_of, table.weight.index_select(0, index))

    def step(_: int) -> None:
        opt.zero_grad()
        head(summed()).sum().backward()
        opt.step()

    print(f"{name}: {unprofiled_ms(step, 5):.1f} ms a step unprofiled")
    write_capture(name, step, active=2, record_shapes=True)


def gat(width_in: int, width_out: int) -> GATConv:
    return GATConv(width_in, width_out // 4, heads=4) if width_out > 8 else GATConv(width_in, width_out)


if __name__ == "__main__":
    torch.set_num_threads(2)
    capture_graph("message_passing_gcn", GCNConv, sparse=False)
    capture_graph("message_passing_gat", gat, sparse=False)
    capture_graph("message_passing_gcn_sparse", GCNConv, sparse=True)
    capture_graph("message_passing_edgeconv", lambda i, o: EdgeConv(torch.nn.Linear(2 * i, o)), sparse=False)
    capture_bags("message_passing_bags", fused=False)
    capture_bags("message_passing_embedding_bag", fused=True)
