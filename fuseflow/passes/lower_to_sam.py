"""Lower every fusion region of a linalg function to one ``sam.graph``."""

from __future__ import annotations

from dataclasses import dataclass

from fuseflow.lowering.module import lower_module
from fuseflow.schedule.regions import REGION_ATTR, assign_regions, body_ops, main_func
from fuseflow.lowering.index_notation import COMPUTE_OPS, is_inlined
from fuseflow.mlir import ir


@dataclass
class Options:
    node_budget: int = 100_000
    order: str = ""


def run(module, options: Options):
    """Lower linalg regions to sam graphs (index-variable unification, joiners, reduce/spacc, writers).

    Compute ops without a ``fuseflow.region`` are partitioned with the ``op`` schedule first.
    Dataflow orders: those ``fuseflow-order`` recorded, else option order=auto|K|i,k,j, else
    the default order.
    The result replaces the module: one ``sam.graph`` per region, tensors bound by name.
    """
    with module.context:
        func = main_func(module)
        ensure_regions(func)
        text, _, _ = lower_module(module, options.node_budget, options.order or None)
        return ir.Module.parse(text)


def ensure_regions(func) -> None:
    """Compute ops without a region each get their own (the ``op`` schedule)."""
    if any(op.name in COMPUTE_OPS and not is_inlined(op) and REGION_ATTR not in op.attributes for op in body_ops(func)):
        assign_regions(func, "op")
