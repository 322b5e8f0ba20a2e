"""A chain of two SpGEMMs, X = A @ B @ C: FuseFlow's dataflow-ordering study.

A is a graph adjacency (Zachary's karate club by default, or `graph=` a file), B and C random
square matrices with `density` nonzeros; all three CSR. Fused in one region, the chain has
several buildable dataflow orders whose cycles differ by large factors:
``fuseflow order-sweep examples/spgemm_chain.py``.
"""

from __future__ import annotations

import torch
from graphs import load_graph


class Chain(torch.nn.Module):
    def forward(self, A, B, C):
        return A @ B @ C


def random_sparse(n: int, m: int, density: float, gen: torch.Generator) -> torch.Tensor:
    values = torch.rand(n, m, generator=gen)
    return values * (torch.rand(n, m, generator=gen) < density)


def build(graph: str | None = None, density: float = 0.1, seed: int = 0):
    A, _ = load_graph(graph)
    n = A.shape[0]
    gen = torch.Generator().manual_seed(seed)
    B, C = random_sparse(n, n, density, gen), random_sparse(n, n, density, gen)
    return Chain().eval(), (A, B, C), {"A": "csr", "B": "csr", "C": "csr"}
