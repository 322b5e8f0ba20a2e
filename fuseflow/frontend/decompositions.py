"""The decomposition table the frontend exports with: torch-mlir's, plus fuseflow's own for ops
it leaves whole that are sums and ALU ops underneath.

- ``linalg_vector_norm`` (``torch.linalg.vector_norm``, ``F.normalize``, AGNNConv's cosine
  attention): the 2-norm is ``sqrt(sum(x * x))``, the 1-norm ``sum(|x|)``, the inf-norm
  ``amax(|x|)`` over the same dimensions; any other order stays whole, and the op check refuses it
  with its source line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

aten = torch.ops.aten


def _vector_norm(x: torch.Tensor, ord: float = 2.0, dim: Any = None, keepdim: bool = False, *, dtype: Any = None):
    if dtype is not None:
        return NotImplemented
    dims = list(range(x.dim())) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    if ord == 2:
        return torch.sqrt(torch.sum(x * x, dims, keepdim))
    if ord == 1:
        return torch.sum(torch.abs(x), dims, keepdim)
    if ord == math.inf:
        return torch.amax(torch.abs(x), dims, keepdim)
    return NotImplemented


OWN: dict[Any, Callable] = {aten.linalg_vector_norm.default: _vector_norm}
"""fuseflow's decompositions, applied after torch-mlir's table."""


def table(base: Mapping[Any, Callable]) -> dict[Any, Callable]:
    """`base` (torch-mlir's table) with fuseflow's decompositions added."""
    return {**base, **OWN}
