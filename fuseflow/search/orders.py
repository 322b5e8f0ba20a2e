"""The order search over a module: each region's order chosen, then the region lowered in it.

Regions are searched in program order, so a region's ranking sees the statistics and densities
its upstream regions' chosen lowerings give (`OrderRanker.commit`). Regions identical up to their
tensors' names (a decoder's heads, a model's decoders) share one choice (`picks`, by structure
key) and one lowering, renamed (`ModuleLowering.lower_like`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from fuseflow.analysis.nests import UnrealisableOrder
from fuseflow.conversion.lower_module import LoweredModule, ModuleLowering, RegionLowering
from fuseflow.mlir import ir
from fuseflow.search.ordering import DEFAULT_CAP, Candidate, RegionVars, choose, estimate_density, fallback_orders
from fuseflow.search.rank import OrderRanker

OrderSpec = str | Mapping[str, str] | None
"""``auto``, ``K`` or ``i,k,j`` for every region, one per region name, or None (the default order)."""


def search_orders(
    module: ir.Module,
    node_budget: int = 100_000,
    spec: OrderSpec = None,
    cap: int = DEFAULT_CAP,
    ranker: OrderRanker | None = None,
    cache: dict | None = None,
) -> tuple[LoweredModule, dict[str, Candidate]]:
    """Lower every region of `module` in its chosen order; returns the sam module and each
    searched region's chosen `Candidate` (with its enumerated alternatives).

    A region's order comes from the function's ``fuseflow.orders`` record when it names the
    region, else from `spec`, else from the lowering's default order. With a `ranker`, ``auto``
    lowers the most promising candidates and keeps the one the cycle model predicts fastest.
    `cache`: region lowerings shared across compiles (the planner's), keyed by structure; the
    lowering owns it (`ModuleLowering`)."""
    ml = ModuleLowering(module, node_budget, cache)
    chosen: dict[str, Candidate] = {}
    # structure of a region -> its order (identical decoders, heads; the planner's compiles share it)
    picked: dict[tuple, Candidate] = ranker.picks if ranker is not None else {}
    if ranker is not None:
        ranker.begin(ml.density, ml.declared_formats)
    for name in ml.regions:
        region = ml.region(name, ml.parse(name))
        region_spec = ml.fixed_orders.get(name, spec.get(name) if isinstance(spec, Mapping) else spec)
        lowering, pick, rv = _search_region(ml, region, region_spec, cap, ranker, picked)
        notes = []
        if pick is not None:
            chosen[name] = pick
            verified = sum(1 for c in pick.alternatives if c.simulated is not None)
            notes.append(f"order: {pick.name}" + (f" (fastest of {verified} simulated)" if verified else ""))
        text = ml.add(region, lowering, notes)
        if ranker is not None:
            ranker.commit(text, region.asgs, lowering.typed)
        for asg in region.asgs:
            ml.density[asg.out] = estimate_density(rv, asg)
    return ml.result(), chosen


def _search_region(
    ml: ModuleLowering,
    region: RegionLowering,
    spec: str | None,
    cap: int,
    ranker: OrderRanker | None,
    picked: dict[tuple, Candidate],
):
    """Choose a region's order (searched, ranked, or taken from an identical region) and lower
    it; returns the lowering, the chosen candidate and the region's variables."""
    costly = ranker.relayout_costs if ranker is not None else None
    key = region.structure((spec, cap), costly) if spec is not None else None
    same = key
    if ml.cache is not None and same is None and spec is None:
        same = region.structure(None, None)
    region.share_as(same)
    declared = region.declared
    rv = RegionVars(
        region.name,
        region.asgs,
        lambda n: declared[n].fmt.mode_order,
        lambda n: declared[n].fmt.levels,
        ml.density,
    )
    pick = picked.get(key) if key is not None else None
    if pick is None and spec is not None:
        pick = choose(rv, spec, cap)
        if ranker is not None and spec.strip() == "auto":
            pick = ranker.rank(region.name, pick, region.at)
        if key is not None:
            picked[key] = pick
    try:
        lowering = ml.lower_like(region, key, list(pick.order) if pick is not None else None)
    except UnrealisableOrder:
        if pick is None or spec is None or _named(spec):
            raise  # the user's own order, or the lowering's default: say why it cannot be built
        lowering, pick = _fallback(ml, region, key, rv, pick, cap)
        if key is not None:
            picked[key] = pick
    return lowering, pick, rv


def _named(spec: str) -> bool:
    """Whether an order spec names the variables (``i,k,j``) rather than asking the search."""
    s = spec.strip()
    return s != "auto" and not s.isdigit()


def _fallback(ml: ModuleLowering, region: RegionLowering, key, rv: RegionVars, pick: Candidate, cap: int):
    """The first of `fallback_orders` that lowers, as the region's pick (its alternatives kept);
    the original refusal when none does."""
    for order in fallback_orders(rv, pick.order):
        try:
            lowering = ml.lower_like(region, key, list(order))
        except UnrealisableOrder:
            continue
        chosen = choose(rv, ",".join(order), cap)
        return lowering, replace(chosen, alternatives=pick.alternatives)
    return ml.lower_like(region, key, list(pick.order)), pick
