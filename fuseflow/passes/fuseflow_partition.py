"""Annotate compute ops with the fusion region they belong to (``fuseflow.region``)."""

from __future__ import annotations

from dataclasses import dataclass

from fuseflow.conversion.linalg_attrs import main_func
from fuseflow.errors import FuseflowError
from fuseflow.passes.context import PassContext
from fuseflow.schedule.regions import assign_regions
from fuseflow.schedule.rules import Schedule


@dataclass(frozen=True)
class Options:
    """``fuseflow-partition{schedule=}``: a built-in schedule name, a schedule file, or ``custom``."""

    schedule: str = "unfused"


def run(module, options: Options, ctx: PassContext | None = None):
    """Assign fusion regions: schedule=unfused (one per PyTorch op), layer, op (one per linalg op), full, or FILE.json.

    Views and initialisers get no region; they fold into their consumer. Before:
    ``%0 = linalg.matmul ...``; after: ``%0 = linalg.matmul {fuseflow.region = "r0_mm"} ...``.
    A schedule file holds rules (``Schedule.save``); ``schedule=custom`` takes the Schedule object
    the caller put in the pass context.
    """
    ctx = ctx or PassContext()
    if ctx.regions_assigned:  # compile() assigned them (and read the rules' options) before the pipeline
        return module
    schedule: str | Schedule = options.schedule
    if schedule == "custom":
        if ctx.schedule is None:
            raise FuseflowError("fuseflow-partition: schedule=custom needs a Schedule from the API (fuseflow.compile)")
        schedule = ctx.schedule
    with module.context:
        assign_regions(main_func(module), schedule, ctx.containers, ctx.module_classes)
    return module
