"""What `Program.estimate` returns: the cycle model's preview of a whole program."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fuseflow.cost.estimates import GraphEstimate
from fuseflow.fabric.scheduler import Span
from fuseflow.fabric.split import SplitPlan

if TYPE_CHECKING:
    from fuseflow.program import Program


@dataclass
class ProgramEstimate:
    """Predicted cycles per region, and the makespan of their placement on the fabric by
    `strategy` (regions do not slow each other down here: memory contention is simulated only)."""

    program: Program
    regions: list[GraphEstimate]
    arch: Any
    strategy: str = "sequential"
    timeline: list[Span] = field(default_factory=list)
    split: SplitPlan | None = None  # the micro-batches of a strategy that splits

    @property
    def cycles(self) -> int:
        """The predicted makespan (sequential: the sum, plus reconfiguration on a finite fabric)."""
        if self.timeline:
            return max(s.end for s in self.timeline)
        return self.serial_cycles

    @property
    def serial_cycles(self) -> int:
        """Predicted cycles if the regions ran one after another."""
        return int(round(sum(r.cycles for r in self.regions)))

    @property
    def alu_ops(self) -> int:
        """Predicted ALU operations, every region summed."""
        return int(round(sum(r.alu_ops for r in self.regions)))

    @property
    def mem_bytes(self) -> int:
        """Predicted bytes read and written, every region summed."""
        return int(round(sum(r.mem_bytes for r in self.regions)))

    def to_json(self, detail: bool = False) -> dict:
        """The estimate as JSON (`detail`: every region's too)."""
        return {
            "estimated_cycles": self.cycles,
            "serial_cycles": self.serial_cycles,
            "strategy": self.strategy,
            "split": self.split.to_json() if self.split is not None else None,
            "timeline": [sp.to_json() for sp in self.timeline],
            "arch": self.arch.name,
            "schedule": self.program.schedule,
            "orders": dict(self.program.orders),
            "alu_ops": self.alu_ops,
            "mem_bytes": self.mem_bytes,
            "regions": [r.to_json(detail) for r in self.regions],
        }
