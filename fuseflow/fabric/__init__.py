"""The fabric: regions share a finite machine (docs/fabric.md).

- `resources`: what each region needs of each resource class, and whether it fits.
- `dag`: which regions feed which (tensor edges).
- `strategy`: strategies that decide when each region starts (built-in and user-defined).
- `scheduler`: the fabric's bookkeeping that checks every start; timelines and utilization.
- `shared_run`: regions that run at the same time simulated in one engine run, sharing the
  memory model's channels.
- `split`, `batches`: micro-batches (the rows cut into ranges, the regions that can be cut, their
  tasks and dependencies).
"""

from fuseflow.fabric.resources import FitError, demand_of
from fuseflow.fabric.scheduler import STRATEGIES, Span, Utilization
from fuseflow.fabric.strategy import Context, RegionTask, Strategy

__all__ = ["STRATEGIES", "Context", "FitError", "RegionTask", "Span", "Strategy", "Utilization", "demand_of"]
