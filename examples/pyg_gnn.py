"""A two-layer PyTorch Geometric GNN, unmodified, on PyG's own KarateClub (no download).

`fuseflow run examples/pyg_gnn.py -O conv=sage` compiles PyG's message passing over `edge_index`
into sparse algebra (docs/architecture.md, "Message passing over edge lists"). Needs the extra:
`pip install '.[pyg]'`. `-O adjacency=sparse` passes PyG's torch.sparse `adj_t` instead.
"""

from __future__ import annotations

import torch


def build(conv: str = "gcn", hidden: int = 16, adjacency: str = "edge_index", seed: int = 0):
    from torch_geometric.datasets import KarateClub
    from torch_geometric.nn import GCNConv, GINConv, SAGEConv
    from torch_geometric.utils import to_torch_csr_tensor

    layers = {
        "gcn": lambda i, o: GCNConv(i, o),
        "sage": lambda i, o: SAGEConv(i, o),
        "sage-max": lambda i, o: SAGEConv(i, o, aggr="max"),
        "gin": lambda i, o: GINConv(torch.nn.Linear(i, o)),
    }
    if conv not in layers:
        raise ValueError(f"conv must be one of {', '.join(layers)}")

    class GNN(torch.nn.Module):
        def __init__(self, f_in: int, n_classes: int):
            super().__init__()
            self.conv1 = layers[conv](f_in, hidden)
            self.conv2 = layers[conv](hidden, n_classes)

        def forward(self, x, edge_index):
            return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

    data = KarateClub()[0]
    torch.manual_seed(seed)
    model = GNN(data.num_features, 4).eval()
    edges = data.edge_index
    if adjacency == "sparse":
        edges = to_torch_csr_tensor(edges.flip(0), size=(data.num_nodes, data.num_nodes))  # PyG's adj_t
    return model, (data.x, edges), {}
