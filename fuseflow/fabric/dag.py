"""The program as a DAG of regions: a region depends on the regions that wrote what it reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fuseflow import views
from fuseflow.sim.graph import GraphSpec


@dataclass(frozen=True)
class Task:
    """One region run: what it reads and writes (tensor names), its units and its position."""

    name: str
    reads: frozenset[str]
    writes: frozenset[str]
    units: dict[str, int] = field(default_factory=dict, hash=False, compare=False)
    host: bool = False  # a conversion of a model input (relayout): modelled, holds no fabric units
    batch: int | None = None  # the micro-batch it runs (fabric/split.py); None: the region whole

    @property
    def label(self) -> str:
        """The task's name in timelines: the region, and its micro-batch after ``#``."""
        return self.name if self.batch is None else f"{self.name}#{self.batch}"


def graph_task(spec: GraphSpec, units: dict[str, int]) -> Task:
    """A region's task: the tensors it reads and writes (its dependences) and the units it holds."""
    reads, writes = set(), set()
    for name, t in spec.tensors.items():
        if t.role == "input":
            reads.add(name)
            reads.update(views.bases_of(t.copy_of or name))
        elif t.role == "output":
            writes.add(name)
    return Task(spec.name, frozenset(reads), frozenset(writes), units)


def dependencies(tasks: Sequence[Task]) -> list[frozenset[int]]:
    """For each task (in program order), the earlier tasks it waits for: the last writer of each
    tensor it reads. Program order is a valid order of the DAG, so no cycle can arise."""
    last_writer: dict[str, int] = {}
    deps: list[frozenset[int]] = []
    for i, t in enumerate(tasks):
        deps.append(frozenset(last_writer[r] for r in t.reads if r in last_writer))
        for w in t.writes:
            last_writer[w] = i
    return deps


def longest_paths(deps: Sequence[frozenset[int]], cost: Sequence[float]) -> list[float]:
    """Each task's cost plus the longest chain of tasks that wait on it (list-scheduling priority)."""
    below = list(cost)
    for i in range(len(deps) - 1, -1, -1):
        for d in deps[i]:
            below[d] = max(below[d], cost[d] + below[i])
    return below
