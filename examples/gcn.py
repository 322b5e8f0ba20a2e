"""Two-layer GCN (FuseFlow's study model): each layer computes lin(A @ H), graph multiply first.

Defaults: Zachary's karate club (shipped by networkx) with normalised adjacency, sparse node
features (10% density), hidden 16, 50% weight sparsity (pruned by magnitude, declared CSR).
`graph=` takes a path to .npz (scipy sparse or the planetoid CSR layout), .mtx or an edge list.
`features_first=True` computes each layer as A @ (H W^T) + b instead (the same function; the
feature transform first, as Kipf and Welling's GCN and PyTorch Geometric's GCNConv do).
"""

from __future__ import annotations

import torch
from graphs import TwoLayerGNN, feature_format, load_graph, normalise, prune, sparse_features


class GCNConv(torch.nn.Module):
    def __init__(self, fin: int, fout: int):
        super().__init__()
        self.lin = torch.nn.Linear(fin, fout)

    def forward(self, A, H):
        return self.lin(A @ H)


class GCNConvFeaturesFirst(GCNConv):
    """The same layer with the feature transform first: A @ (H W^T) + b."""

    def forward(self, A, H):
        return A @ (H @ self.lin.weight.T) + self.lin.bias


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
    features_first: bool = False,
):
    torch.manual_seed(seed)
    A, X = load_graph(graph, max_features)
    A = normalise(A)
    if X is None:
        X = sparse_features(A.shape[0], features, feature_density, seed)
    conv = GCNConvFeaturesFirst if features_first else GCNConv
    model = TwoLayerGNN(conv, X.shape[1], hidden, classes, softmax).eval()
    prune(model, weight_sparsity)
    formats = {"A": "csr", "X": feature_format(X), "conv1.lin.weight": "csr", "conv2.lin.weight": "csr"}
    return model, (A, X), formats
