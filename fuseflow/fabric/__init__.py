"""The fabric: regions share a finite machine (docs/fabric.md).

- `resources`: what each region needs of each resource class, and whether it fits.
- `dag`: which regions feed which (tensor edges).
- `scheduler`: strategies that decide when each region starts; timelines and utilization.
- `shared_run`: regions that run at the same time simulated in one engine run, sharing the
  memory model's channels.
"""

from fuseflow.fabric.resources import FitError, demand_of
from fuseflow.fabric.scheduler import STRATEGIES, Span, Utilization

__all__ = ["STRATEGIES", "FitError", "Span", "Utilization", "demand_of"]
