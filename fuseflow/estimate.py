"""What `Program.estimate` returns: the cycle model's preview of a whole program."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fuseflow.analysis.cycle_model import GraphEstimate

if TYPE_CHECKING:
    from fuseflow.program import Program


@dataclass
class ProgramEstimate:
    """Predicted cycles per region and in total (regions run one after another)."""

    program: "Program"
    regions: list[GraphEstimate]
    arch: Any

    @property
    def cycles(self) -> int:
        return int(round(sum(r.cycles for r in self.regions)))

    @property
    def alu_ops(self) -> int:
        return int(round(sum(r.alu_ops for r in self.regions)))

    @property
    def mem_bytes(self) -> int:
        return int(round(sum(r.mem_bytes for r in self.regions)))

    def to_json(self, detail: bool = False) -> dict:
        return {
            "estimated_cycles": self.cycles,
            "arch": self.arch.name,
            "schedule": self.program.schedule,
            "orders": dict(self.program.orders),
            "alu_ops": self.alu_ops,
            "mem_bytes": self.mem_bytes,
            "regions": [r.to_json(detail) for r in self.regions],
        }
