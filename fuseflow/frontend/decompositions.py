"""The decomposition table the frontend exports with: torch-mlir's, plus fuseflow's own for ops
it leaves whole that are sums and ALU ops underneath.

- ``linalg_vector_norm`` (``torch.linalg.vector_norm``, ``F.normalize``, AGNNConv's cosine
  attention): the 2-norm is ``sqrt(sum(x * x))``, the 1-norm ``sum(|x|)``, the inf-norm
  ``amax(|x|)`` over the same dimensions; any other order stays whole, and the op check refuses it
  with its source line.
- ``batch_norm`` in eval mode (running statistics; GENConv's MLP): ``(x - mean) * rsqrt(var + eps)
  * weight + bias`` per channel (dimension 1). Torch's own decomposition casts through
  ``prims.convert_element_type``, which no lowering takes; training mode stays whole and is
  refused.
- ``softplus``: the stable ``relu(b x) + log1p(exp(-|b x|))`` over b, the ALU's ops, in place of
  torch's ``where(b x > threshold, x, ...)``, which needs a comparison no lowering takes (they
  differ by at most log1p(exp(-threshold)) / b, 2e-9 at PyTorch's default 20); and ``log1p(x)``
  as ``log(x + 1)`` in the model's graph. The message-passing graph keeps ``log1p`` (on edge
  values it is ``log(e + 1)`` times the pattern: edge_ops.py), and its rewritten model is
  exported again with this table.
- ``repeat`` by ones: a copy; any other repeat stays whole and is refused.
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


def _normalized(x, weight, bias, mean, var, eps: float):
    shape = [1, -1] + [1] * (x.dim() - 2)  # per channel: dimension 1
    scale = torch.rsqrt(var + eps)
    if weight is not None:
        scale = scale * weight
    out = (x - mean.view(shape)) * scale.view(shape)
    return out if bias is None else out + bias.view(shape)


def _batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    if training or running_mean is None or running_var is None:
        return NotImplemented
    return _normalized(x, weight, bias, running_mean, running_var, eps)


def _batch_norm_no_training(x, weight, bias, running_mean, running_var, momentum, eps):
    empty = x.new_zeros((0,))
    return _normalized(x, weight, bias, running_mean, running_var, eps), empty, empty


def _softplus(x: torch.Tensor, beta: float = 1.0, threshold: float = 20.0):
    bx = x * beta
    return (torch.relu(bx) + torch.log1p(torch.exp(-torch.abs(bx)))) / beta


def _log1p(x: torch.Tensor):
    return torch.log(x + 1.0)


def _repeat(x: torch.Tensor, repeats):
    if any(int(r) != 1 for r in repeats) or len(repeats) != x.dim():
        return NotImplemented
    return x.clone()  # repeat(1, ..., 1): a copy (PNAConv's one tower)


EDGES: dict[Any, Callable] = {aten.softplus.default: _softplus}
"""Decompositions for the message-passing graph as well as the model's."""
OWN: dict[Any, Callable] = {
    **EDGES,
    aten.log1p.default: _log1p,
    aten.repeat.default: _repeat,
    aten.linalg_vector_norm.default: _vector_norm,
    aten.batch_norm.default: _batch_norm,
    aten._native_batch_norm_legit_no_training.default: _batch_norm_no_training,
}
"""fuseflow's decompositions, applied after torch-mlir's table."""


def table(base: Mapping[Any, Callable], *, edges: bool = False) -> dict[Any, Callable]:
    """`base` (torch-mlir's table) with fuseflow's decompositions added (`edges`: for the
    message-passing graph, where log1p stays whole)."""
    own = {k: v for k, v in OWN.items() if k is not aten.log1p.default} if edges else OWN
    return {**base, **own}
