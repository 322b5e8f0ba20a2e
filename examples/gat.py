"""A two-layer graph attention network (PyTorch Geometric's `GATConv`, unmodified): 8 heads
concatenated, then 1, on networkx's karate club by default or a graph file.

`fuseflow run examples/gat.py` compiles PyG's message passing over `edge_index`: each edge's
attention score (`leaky_relu` of the gathered source and target terms), the softmax over each
node's incoming edges and the weighted sum become sparse algebra over the edge list's pattern
(docs/architecture.md, "Message passing over edge lists"). Needs the extra:
`pip install '.[pyg]'`.

    fuseflow run examples/gat.py
    fuseflow run examples/gat.py -O graph=../shared/data/planetoid/cora.npz -O features=64
    fuseflow study examples/gat.py --schedules unfused,layer,full,auto
"""

from __future__ import annotations

import torch
from graphs import load_graph


class GAT(torch.nn.Module):
    """GATConv(heads) -> ReLU -> GATConv(1 head): the GAT paper's Cora model, smaller, with ReLU for its
    ELU (not in the op table yet)."""

    def __init__(self, f_in: int, hidden: int, classes: int, heads: int):
        from torch_geometric.nn import GATConv  # optional extra: pip install '.[pyg]'

        super().__init__()
        self.conv1 = GATConv(f_in, hidden, heads=heads)
        self.conv2 = GATConv(hidden * heads, classes, heads=1)

    def forward(self, x, edge_index):
        """conv2(relu(conv1(x)))."""
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


def build(
    graph: str | None = None, heads: int = 8, hidden: int = 8, classes: int = 4, features: int = 34, seed: int = 0
):
    """The model, (node features, edge_index) and no formats: the edge list is the sparse input.
    Karate club nodes get one-hot features (PyG's KarateClub does the same); a graph file's own
    features are cut to `features` columns."""
    adjacency, x = load_graph(graph, max_features=features)
    a = adjacency.to_dense() if adjacency.layout != torch.strided else adjacency
    edge_index = a.nonzero().t().flip(0).contiguous()  # PyG's (source, target) rows
    n = a.shape[0]
    if x is None:
        x = torch.eye(n, features) if features <= n else torch.eye(n)
    torch.manual_seed(seed)
    model = GAT(x.shape[1], hidden, classes, heads).eval()
    return model, (x, edge_index), {}
