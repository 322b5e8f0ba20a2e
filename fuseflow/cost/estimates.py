"""The cycle model's answer: predicted cycles, tokens, ALU ops and bytes per node and per graph."""

from __future__ import annotations

from dataclasses import dataclass

from fuseflow.cost.tensor_stats import TensorStats
from fuseflow.errors import FuseflowError


class EstimateError(FuseflowError):
    """The model cannot cover this graph or architecture (the message says what)."""


@dataclass
class NodeEstimate:
    """Predicted work of one node: tokens it emits (the simulator's `tokens_out`; a sink's
    `tokens_in`), the cycles it is busy, ALU element ops, memory bytes, and the memory lines it
    waits for (the simulator's `mem_lines`, with the memory model on)."""

    name: str
    kind: str
    tokens: float
    busy: float
    alu_ops: float = 0.0
    mem_bytes: float = 0.0
    lines: float = 0.0


@dataclass
class GraphEstimate:
    """Predicted cycles of one graph, its nodes, and the statistics of the tensors it writes."""

    name: str
    cycles: float
    nodes: list[NodeEstimate]
    outputs: dict[str, TensorStats]
    bottleneck: str
    fill: float
    memory_cycles: float = 0.0
    recompute: float = 1.0  # most times any stored input value is loaded

    @property
    def alu_ops(self) -> float:
        """ALU operations over the graph's nodes."""
        return sum(n.alu_ops for n in self.nodes)

    @property
    def mem_bytes(self) -> float:
        """Bytes the graph's nodes read and write."""
        return sum(n.mem_bytes for n in self.nodes)

    @property
    def tokens(self) -> float:
        """Tokens the graph's nodes emit (the simulator's events)."""
        return sum(n.tokens for n in self.nodes)

    def to_json(self, detail: bool = False) -> dict:
        """The estimate as `fuseflow estimate --json` prints it; `detail` adds every node."""
        out = {
            "name": self.name,
            "cycles": round(self.cycles),
            "alu_ops": round(self.alu_ops),
            "mem_bytes": round(self.mem_bytes),
            "tokens": round(self.tokens),
            "bottleneck": self.bottleneck,
            "fill": round(self.fill),
            "memory_cycles": round(self.memory_cycles),
            "recompute": round(self.recompute, 3),
        }
        if detail:
            out["nodes"] = [
                {
                    "name": n.name,
                    "kind": n.kind,
                    "tokens": round(n.tokens),
                    "busy": round(n.busy),
                    "alu_ops": round(n.alu_ops),
                    "mem_bytes": round(n.mem_bytes),
                }
                for n in self.nodes
            ]
        return out
