"""Lower every fusion region of a linalg function to one ``sam.graph``."""

from __future__ import annotations

from dataclasses import dataclass

from fuseflow.conversion.linalg_to_index import COMPUTE_OPS, is_inlined
from fuseflow.conversion.lower_module import lower_module
from fuseflow.dialects.sam_ir import parse_module, with_graphs
from fuseflow.passes.context import PassContext
from fuseflow.schedule.regions import REGION_ATTR, assign_regions, body_ops, main_func


@dataclass(frozen=True)
class Options:
    """``lower-to-sam{node-budget= order=}``: the most sam nodes a region may lower to; a fixed order."""

    node_budget: int = 100_000
    order: str = ""


def run(module, options: Options, ctx: PassContext | None = None):
    """Lower linalg regions to sam graphs (index-variable unification, joiners, reduce/spacc, writers).

    Compute ops without a ``fuseflow.region`` are partitioned with the ``op`` schedule first.
    Dataflow orders: those ``fuseflow-order`` recorded, else option order=auto|K|i,k,j, else
    the default order.
    The result replaces the module: one ``sam.graph`` per region, tensors bound by name.
    """
    text, _ = lower(module, options, ctx)
    return parse_module(text)


def lower(module, options: Options, ctx: PassContext | None = None) -> tuple[str, str]:
    """`run` without parsing its result: the sam module's text, and the text of a module of its
    graphs that are not renamed copies of earlier ones (parsing that verifies every distinct
    graph; `compile` does so when nothing follows this pass). Sets the context's summary,
    chosen orders, index notation and typed graphs."""
    ctx = ctx or PassContext()
    with module.context:
        func = main_func(module)
        ensure_regions(func)
        stash, ctx.lowered = ctx.lowered, None
        if stash is not None and stash[0] is module and options.node_budget == ctx.node_budget:
            text, summary, assigns, typed, distinct = stash[1:]  # fuseflow-order just lowered it
        else:
            typed, distinct = [], []
            text, summary, chosen, assigns = lower_module(
                module, options.node_budget, options.order or None, typed=typed, distinct=distinct
            )
            ctx.chosen.update(chosen)
        ctx.summary, ctx.assigns, ctx.typed = summary, assigns, typed
        return text, with_graphs(text, distinct)


def ensure_regions(func) -> None:
    """Compute ops without a region each get their own (the ``op`` schedule)."""
    if any(op.name in COMPUTE_OPS and not is_inlined(op) and REGION_ATTR not in op.attributes for op in body_ops(func)):
        assign_regions(func, "op")
