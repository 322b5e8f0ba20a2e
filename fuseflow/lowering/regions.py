"""Fusion regions of a linalg function: which compute ops form one dataflow graph.

A region is named by the ``fuseflow.region`` attribute its compute ops carry (set by the
``fuseflow-partition`` pass). Views (transpose, broadcast, cast) and initialisers (empty, fill,
constants) belong to no region: they fold into whichever op consumes them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from fuseflow.errors import UnsupportedError
from fuseflow.lowering.index_notation import COMPUTE_OPS, IGNORED_OPS, VIEW_OPS
from fuseflow.mlir import ir, location_str

REGION_ATTR = "fuseflow.region"


def main_func(module: ir.Module):
    funcs = [op for op in module.body.operations if op.operation.name == "func.func"]
    if len(funcs) != 1:
        raise UnsupportedError(f"expected exactly one func.func in the module, found {len(funcs)}")
    return funcs[0].operation


def body_ops(func) -> list[ir.Operation]:
    return [op.operation for op in func.regions[0].blocks[0].operations]


def check_supported(func) -> list[ir.Operation]:
    """The compute ops of `func`; any op fuseflow cannot lower is reported at its location."""
    compute = []
    for op in body_ops(func):
        if op.name in COMPUTE_OPS:
            compute.append(op)
        elif op.name not in VIEW_OPS and op.name not in IGNORED_OPS:
            raise UnsupportedError(f"unsupported op '{op.name}': fuseflow cannot lower it to sam",
                                   location_str(op.location))
    return compute


def fx_node_name(op: ir.Operation) -> str | None:
    """The FX node name the frontend wrapped around the op's location (NameLoc)."""
    m = re.match(r'loc\("([^"]+)"\(', str(op.location))
    return m.group(1) if m else None


@dataclass
class Partition:
    """Region name per compute op, in program order."""

    names: list[str]

    @staticmethod
    def of(func) -> "Partition":
        ops = check_supported(func)
        names = []
        for op in ops:
            if REGION_ATTR not in op.attributes:
                raise UnsupportedError(f"'{op.name}' has no {REGION_ATTR} attribute: run fuseflow-partition first",
                                       location_str(op.location))
            names.append(ir.StringAttr(op.attributes[REGION_ATTR]).value)
        return Partition(names)


def assign_regions(func, schedule: str) -> list[str]:
    """Annotate compute ops with region names for a named schedule; returns them in order."""
    ops = check_supported(func)
    names: list[str] = []
    if schedule == "full":
        names = ["full"] * len(ops)
    elif schedule == "unfused":
        # one region per PyTorch operator: ops imported from one FX node share a region
        seen: dict[str, str] = {}
        for i, op in enumerate(ops):
            key = fx_node_name(op) or f"op{i}"
            if key not in seen:
                seen[key] = f"r{len(seen)}_{key}"
            names.append(seen[key])
    elif schedule == "op":
        names = [f"r{i}_{fx_node_name(op) or op.name.split('.')[-1]}" for i, op in enumerate(ops)]
    else:
        raise UnsupportedError(f"unknown schedule {schedule!r}; expected unfused, full or op")
    for op, name in zip(ops, names):
        with op.context:
            op.attributes[REGION_ATTR] = ir.StringAttr.get(name)
    return names
