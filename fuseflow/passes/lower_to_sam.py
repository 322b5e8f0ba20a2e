"""Lower every fusion region of a linalg function to one ``sam.graph``."""
from __future__ import annotations

from dataclasses import dataclass

from fuseflow.lowering.module import lower_module
from fuseflow.lowering.regions import REGION_ATTR, assign_regions, body_ops, main_func
from fuseflow.lowering.index_notation import COMPUTE_OPS, is_inlined
from fuseflow.mlir import ir


@dataclass
class Options:
    node_budget: int = 100_000


def run(module, options: Options):
    """Lower linalg regions to sam graphs (index-variable unification, joiners, reduce/spacc, writers).

    Compute ops without a ``fuseflow.region`` are partitioned with the ``op`` schedule first.
    The result replaces the module: one ``sam.graph`` per region, tensors bound by name.
    """
    with module.context:
        func = main_func(module)
        if any(op.name in COMPUTE_OPS and not is_inlined(op) and REGION_ATTR not in op.attributes for op in body_ops(func)):
            assign_regions(func, "op")
        text, _ = lower_module(module, options.node_budget)
        return ir.Module.parse(text)
