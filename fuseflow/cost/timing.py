"""The simulator's timing parameters the cycle model reads, and the settings it covers: a setting
without a rule is refused, never ignored."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fuseflow.cost.estimates import EstimateError

COVERED_SETTINGS = frozenset(
    {
        "fifo_depth",
        "latency",
        "ii",
        "kinds",
        "scan_emit_on_pop",
        "reduce_split_stop",
        "tile_matmul_ii_per_b",
        "tile_elementwise_ii_per_b",
        "memory",
        "max_fifo_mib",
        "max_seconds",
        "spill_tokens",
    }
)
"""Architecture settings (sim/arch.py) the model reads or that do not change cycles."""
COVERED_MEMORY = frozenset({"enabled", "channels", "bytes_per_request", "latency", "ii", "startup"})


@dataclass(frozen=True)
class Timing:
    """The simulator's timing parameters that the model reads (sim/arch.py keys)."""

    latency: int = 1
    ii: int = 1
    kinds: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    scan_emit_on_pop: bool = False
    reduce_split_stop: bool = False
    tile_matmul_ii_per_b: int = 1
    tile_elementwise_ii_per_b: int = 1
    memory: Mapping[str, Any] | None = None
    fifo_depth: int = 10_240_000

    @staticmethod
    def from_settings(settings: Mapping[str, Any]) -> Timing:
        """From `Arch.settings` (what the C++ graph is built from); a setting the model has no
        rule for is refused rather than silently ignored."""
        s = dict(settings)
        for k in s:
            if k not in COVERED_SETTINGS:
                raise EstimateError(
                    f"the cycle model does not cover the architecture setting {k!r}; "
                    f"covered: {', '.join(sorted(COVERED_SETTINGS))} (simulate instead)"
                )
        for k in dict(s.get("memory") or {}):
            if k not in COVERED_MEMORY:
                raise EstimateError(
                    f"the cycle model does not cover the memory setting {k!r}; "
                    f"covered: {', '.join(sorted(COVERED_MEMORY))} (simulate instead)"
                )
        return Timing(
            int(s.get("latency", 1)),
            int(s.get("ii", 1)),
            dict(s.get("kinds", {})),
            bool(s.get("scan_emit_on_pop", False)),
            bool(s.get("reduce_split_stop", False)),
            int(s.get("tile_matmul_ii_per_b", 1)),
            int(s.get("tile_elementwise_ii_per_b", 1)),
            s.get("memory"),
            int(s.get("fifo_depth", 10_240_000)),
        )

    def kind_latency(self, kind: str) -> int:
        """A kind's latency: its ``[arch.kinds]`` entry, or the default."""
        return int(self.kinds.get(kind, {}).get("latency", self.latency))

    def kind_ii(self, kind: str) -> int:
        """A kind's initiation interval: its ``[arch.kinds]`` entry, or the default."""
        return int(self.kinds.get(kind, {}).get("ii", self.ii))

    def tile_busy(self, rank: int, b: int) -> int:
        """Cycles a tile of `rank` axes of extent b occupies a node (node.h `occupy`)."""
        if rank >= 3:
            return b * self.tile_matmul_ii_per_b
        return -(-(b**rank) // b) * self.tile_elementwise_ii_per_b

    def tile_latency(self, rank: int, b: int) -> int:
        """Cycles before a tile's result is visible (node.h `occupy`: 2b - 1 on the matmul unit,
        its elements otherwise)."""
        return 2 * b - 1 if rank >= 3 else b**rank


def model_approximates(timing: Timing) -> bool:
    """Whether the model only approximates this timing: FIFOs shallower than the memory latency
    stall in ways `memory_stalls` estimates but does not follow token by token."""
    mem = timing.memory
    return mem is not None and bool(mem.get("enabled", True)) and int(mem.get("latency", 0)) > timing.fifo_depth
