"""Single sparse kernels written the PyTorch way, for dataflow-order studies.

``build(kernel=...)``:
- ``spmv``: ``A @ x`` (A CSR, 5% dense);
- ``spmm``: ``A @ X`` (A CSR, X dense);
- ``sddmm``: ``B * (C @ D)`` (B sparse, C and D dense), the kernel whose default order used to be
  20x off the best (``orientation="csc"`` stores B column-major);
- ``masked``: a masked attention row softmax, ``softmax(masked_fill(Q @ K^T, mask == 0, -inf))``.

``fuseflow order-sweep examples/kernels.py -O kernel=sddmm`` simulates every order.
"""

from __future__ import annotations

import torch


class SpMV(torch.nn.Module):
    def forward(self, A, x):
        return A @ x


class SpMM(torch.nn.Module):
    def forward(self, A, X):
        return A @ X


class SDDMM(torch.nn.Module):
    def forward(self, B, C, D):
        return B * (C @ D)


class Masked(torch.nn.Module):
    def forward(self, mask, Q, K):
        s = (Q @ K.transpose(0, 1)).masked_fill(mask == 0, float("-inf"))
        return torch.softmax(s, dim=-1)


def _sparse(n: int, m: int, density: float, gen: torch.Generator) -> torch.Tensor:
    return torch.rand(n, m, generator=gen) * (torch.rand(n, m, generator=gen) < density)


def build(
    kernel: str = "sddmm", n: int = 128, k: int = 256, density: float = 0.05, orientation: str = "csr", seed: int = 0
):
    gen = torch.Generator().manual_seed(seed)
    if kernel == "spmv":
        return SpMV().eval(), (_sparse(n, k, density, gen), torch.rand(k, generator=gen)), {"A": orientation}
    if kernel == "spmm":
        return SpMM().eval(), (_sparse(n, k, density, gen), torch.rand(k, 16, generator=gen)), {"A": orientation}
    if kernel == "sddmm":
        B = _sparse(n, n, density, gen)
        return SDDMM().eval(), (B, torch.rand(n, k, generator=gen), torch.rand(k, n, generator=gen)), {"B": orientation}
    if kernel == "masked":
        mask = (torch.rand(n, n, generator=gen) < max(density, 0.1)).float()
        mask.fill_diagonal_(1.0)
        return (
            Masked().eval(),
            (mask, torch.rand(n, 16, generator=gen), torch.rand(n, 16, generator=gen)),
            {"mask": orientation},
        )
    raise ValueError(f"unknown kernel {kernel!r}; one of spmv, spmm, sddmm, masked")
