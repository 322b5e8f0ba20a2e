"""Two-layer GraphSAGE: h' = lin_self(h) + lin_neigh(mean of neighbours' h), 50% weight sparsity.

Mean aggregation is written as PyTorch users do: (A @ H) / degree, with the degree computed in
the model (A.sum(1)); fuseflow lowers the division by a hoisted per-row reduction.
"""

from __future__ import annotations

import torch
from graphs import TwoLayerGNN, feature_format, load_graph, prune, sparse_features


class SAGEConv(torch.nn.Module):
    def __init__(self, fin: int, fout: int):
        super().__init__()
        self.lin_self = torch.nn.Linear(fin, fout)
        self.lin_neigh = torch.nn.Linear(fin, fout, bias=False)

    def forward(self, A, H):
        deg = A.sum(dim=1, keepdim=True)
        if deg.layout != torch.strided:  # a torch sparse CSR adjacency sums to a sparse column
            deg = deg.to_dense()
        deg = deg.clamp(min=1.0)
        return self.lin_self(H) + self.lin_neigh((A @ H) / deg)


def build(
    graph: str | None = None,
    features: int = 32,
    hidden: int = 16,
    classes: int = 4,
    weight_sparsity: float = 0.5,
    feature_density: float = 0.1,
    seed: int = 0,
    max_features: int | None = 256,
    softmax: bool = False,
):
    torch.manual_seed(seed)
    A, X = load_graph(graph, max_features)
    if X is None:
        X = sparse_features(A.shape[0], features, feature_density, seed)
    model = TwoLayerGNN(SAGEConv, X.shape[1], hidden, classes, softmax).eval()
    prune(model, weight_sparsity)
    formats = {"A": "csr", "X": feature_format(X)}
    for name, _ in model.named_parameters():
        if name.endswith("weight"):
            formats[name] = "csr"
    return model, (A, X), formats
