"""Choose each fusion region's dataflow order and record it for ``lower-to-sam``."""

from __future__ import annotations

from dataclasses import dataclass

from fuseflow.conversion.linalg_attrs import main_func, set_orders
from fuseflow.passes.context import KeptLowering, PassContext
from fuseflow.passes.lower_to_sam import ensure_regions
from fuseflow.search.ordering import DEFAULT_CAP
from fuseflow.search.orders import search_orders
from fuseflow.search.rank import OrderRanker


@dataclass(frozen=True)
class Options:
    """``fuseflow-order{order= cap=}``: the order spec (`parse_order`); at most `cap` orders enumerated per region."""

    order: str = "auto"
    cap: int = DEFAULT_CAP


def parse_order(text: str) -> str | dict[str, str]:
    """``auto`` / ``3`` / ``i,k,j`` for every region, or ``region:order;region2:order`` per region."""
    if ":" not in text:
        return text
    return dict(item.split(":", 1) for item in text.split(";") if item)


def run(module, options: Options, ctx: PassContext | None = None):
    """Pick a dataflow order per region: order=auto (cycle model), order=K (K-th enumerated), order=i,k,j.

    ``order=r0:auto;r1:i,k,j`` gives one per region (regions not named keep the lowering's own).
    Orders concordant with the tensors' storage orders are enumerated first, then discordant ones
    (the tensor is re-laid out, its cost counted); at most `cap`. The choice is written as
    ``fuseflow.orders = {region = "i,k,j"}`` on the function; ``lower-to-sam`` follows it.
    Regions come from ``fuseflow-partition`` (without it, every compute op is its own region).
    Ranking lowers each region's shortlist; the winner's lowering is kept in the pass context so
    that ``lower-to-sam`` right after reuses it instead of lowering again.
    """
    ctx = ctx or PassContext()
    with module.context:
        func = main_func(module)
        ensure_regions(func)
        set_orders(func, None)
        spec = ctx.order if ctx.order is not None else parse_order(options.order)
        ranker = ctx.ranker or OrderRanker()
        lowered, chosen = search_orders(module, ctx.node_budget, spec, options.cap, ranker, ctx.lowering_cache)
        set_orders(func, {r: c.name for r, c in chosen.items()})
        ctx.chosen.update(chosen)
        ctx.lowered = KeptLowering(module, lowered)
    return module
