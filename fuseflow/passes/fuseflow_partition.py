"""Annotate compute ops with the fusion region they belong to (``fuseflow.region``)."""

from __future__ import annotations

from dataclasses import dataclass

from fuseflow.schedule.regions import assign_regions, main_func


@dataclass
class Options:
    schedule: str = "unfused"


def run(module, options: Options):
    """Assign fusion regions: schedule=unfused (one per PyTorch op), layer, op (one per linalg op) or full.

    Views and initialisers get no region; they fold into their consumer. Before:
    ``%0 = linalg.matmul ...``; after: ``%0 = linalg.matmul {fuseflow.region = "r0_mm"} ...``.
    """
    with module.context:
        assign_regions(main_func(module), options.schedule)
    return module
