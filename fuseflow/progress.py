"""Live progress of long simulations: one line per region with its simulated cycle count."""

from __future__ import annotations

from typing import Any


class progress_reporter:
    """`progress=True`: a transient rich display of each region's simulated cycles."""

    def __init__(self, progress: Any):
        self.progress, self.live, self.tasks = progress, None, {}  # type: Any, Any, dict[str, Any]

    def __enter__(self):
        if self.progress is True:
            from rich.progress import (  # rich only when a table or progress bar is shown
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self.live = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), transient=True)
            self.live.start()
            return self.show
        return self.progress if callable(self.progress) else None

    def show(self, region: str, cycle: int) -> None:
        """Show `region` at `cycle` (a live line per region)."""
        if region not in self.tasks:
            self.tasks[region] = self.live.add_task(region, total=None)
        self.live.update(self.tasks[region], description=f"simulating {region}: {cycle:,} cycles")

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.stop()
