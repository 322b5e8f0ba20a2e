"""Lower every fusion region of a linalg function to one ``sam.graph``."""

from __future__ import annotations

from dataclasses import dataclass

from fuseflow.conversion.linalg_attrs import compute_ops, main_func, region_of
from fuseflow.dialects.sam_ir import parse_module, with_graphs
from fuseflow.passes.context import PassContext
from fuseflow.schedule.regions import assign_regions
from fuseflow.search.orders import search_orders


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
        kept, ctx.lowered = ctx.lowered, None
        if kept is not None and kept.module is module and options.node_budget == ctx.node_budget:
            lowered = kept.lowered  # fuseflow-order just lowered it
        else:
            lowered, chosen = search_orders(module, options.node_budget, options.order or None)
            ctx.chosen.update(chosen)
        ctx.summary, ctx.assigns, ctx.typed = lowered.summary, lowered.assigns, lowered.typed
        return lowered.text, with_graphs(lowered.text, lowered.distinct)


def ensure_regions(func) -> None:
    """Compute ops without a region each get their own (the ``op`` schedule)."""
    if any(region_of(op) is None for op in compute_ops(func)):
        assign_regions(func, "op")
