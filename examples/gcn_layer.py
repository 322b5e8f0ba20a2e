"""One GCN layer relu(A @ (X @ W) + b) on Zachary's karate club (shipped by networkx).

`build(**options) -> (model, example_args, formats)` is shared by the CLI, tests and `make demo`.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import torch


class GCNLayer(torch.nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.lin = torch.nn.Linear(in_features, out_features)

    def forward(self, A: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        return torch.relu(A @ self.lin(X))


def karate_adjacency() -> torch.Tensor:
    """Symmetric normalised adjacency D^-1/2 (A + I) D^-1/2 of the karate club graph."""
    a = nx.to_numpy_array(nx.karate_club_graph(), weight=None) + np.eye(34)
    d = 1.0 / np.sqrt(a.sum(1))
    return torch.tensor(a * d[:, None] * d[None, :], dtype=torch.float32)


def build(features: int = 16, hidden: int = 8, seed: int = 0):
    torch.manual_seed(seed)
    A = karate_adjacency()
    X = torch.rand(A.shape[0], features)
    return GCNLayer(features, hidden).eval(), (A, X), {"A": "csr"}
