"""``fuseflow order-sweep``: every enumerated dataflow order of one region, simulated and
checked, beside the cycle model's prediction and the order ``order="auto"`` picks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import fuseflow
from fuseflow.errors import FuseflowError


def order_sweep(
    built: tuple,
    *,
    schedule: Any = "unfused",
    region: str | None = None,
    cap: int = 64,
    arch: Any = None,
    engine: str = "auto",
    started: Callable[[str, int], None] | None = None,
    done: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """``{"schedule", "region", "arch", "auto", "orders": [row per order]}``. Each row: the
    order's index and name, the model inputs it re-lays out, the static estimate, the predicted
    and simulated cycles of the region (re-layouts included), the error against PyTorch and how
    far it is from the best; an order that fails is a row with its ``error``. `region` may be
    left out when the schedule has one region."""

    model, args, formats = built
    first = fuseflow.compile(model, args, formats=formats, schedule=schedule, order="auto")
    regions = list(first.order_candidates)
    region = region or (regions[0] if len(regions) == 1 else None)
    if region is None or region not in first.order_candidates:
        raise FuseflowError(
            f"choose a region with --region: {', '.join(regions)}"
            if region is None
            else f"no region {region!r}; regions: {', '.join(regions)}"
        )
    cands = list(first.order_candidates[region])[:cap]
    auto = first.orders[region]
    if started:
        started(region, len(cands))
    rows = []
    for c in cands:
        row: dict[str, Any] = {
            "index": c.index,
            "order": c.name,
            "relayouts": list(c.relayouts),
            "estimate": round(c.estimate.cost),
            "auto": c.name == auto,
        }
        try:
            prog = first.reorder({region: c.name})
            res = prog.simulate(arch=arch, engine=engine)
            row["max_abs_error"] = res.check()
            row["cycles"] = res.cycles
            conversions = sum(r.cycles for r in res.regions if r.engine == "model")
            row["relayout_cycles"] = conversions
            row["region_cycles"] = next(r.cycles for r in res.regions if r.name == region) + conversions
            est = prog.estimate(arch=arch)
            row["predicted"] = round(
                next(r.cycles for r in est.regions if r.name == region)
                + sum(r.cycles for r in est.regions if r.bottleneck == "relayout")
            )
        except FuseflowError as e:  # one order failing does not lose the others
            row["error"] = str(e).splitlines()[0][:300]
        rows.append(row)
        if done:
            done()
    finished = [r for r in rows if "cycles" in r]
    best = min((r["region_cycles"] for r in finished), default=None)
    for r in finished:
        r["vs_best"] = round(r["region_cycles"] / best, 3) if best else None
    return {"schedule": schedule, "region": region, "arch": arch, "auto": auto, "orders": rows}
