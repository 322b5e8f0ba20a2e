"""A program split into micro-batches: the tasks, their dependencies, their runs.

Each region that can be cut (fabric/split.py) becomes one task per micro-batch; the others, and
the relayouts, stay whole. A micro-batch task waits for the same micro-batch of a producer it
reads by rows (the rows it needs are exactly the ones that micro-batch writes) and for every
task of a producer it reads otherwise (``A @ H`` reads all of H's rows for each of its own).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse

from fuseflow import views
from fuseflow.errors import MismatchError
from fuseflow.fabric.dag import Task, graph_task
from fuseflow.fabric.resources import demand_of
from fuseflow.fabric.split import RegionCut, SplitInfo, SplitPlan, batch_inputs, batch_spec, cut_region, slice_rows
from fuseflow.sim.arch import Arch
from fuseflow.sim.graph import GraphSpec, run_graph

if TYPE_CHECKING:
    from fuseflow.program import Program


@dataclass
class Batched:
    """The tasks of a split program, in program order (relayouts first, then each region's
    micro-batches), and what each runs: `specs[i]` (None for a relayout), `region[i]` (the
    program's task index it comes from), `rows[i]` (its row range, None when whole)."""

    plan: SplitPlan
    tasks: list[Task]
    deps: list[frozenset[int]]
    specs: list[GraphSpec | None]
    region: list[int]
    rows: list[tuple[int, int] | None]
    cuts: dict[int, RegionCut] = field(default_factory=dict)  # program task index -> its cut
    whole: dict[int, GraphSpec] = field(default_factory=dict)  # program task index -> its region's graph

    def inputs(self, i: int, env: Mapping[str, Any]) -> Mapping[str, Any]:
        """What task `i` reads, from the program's values `env`."""
        spec, rows = self.specs[i], self.rows[i]
        if rows is None or spec is None:
            return env
        return batch_inputs(self.whole[self.region[i]], self.cuts[self.region[i]], env, *rows)

    def expected(self, i: int, env: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """What task `i` must write: its rows of the unsplit run's outputs."""
        spec, rows = self.specs[i], self.rows[i]
        if spec is None:
            return {}
        out = {}
        for name, t in spec.tensors.items():
            if t.role == "output" and name in env:
                full: Any = env[name]
                full = full.toarray() if scipy.sparse.issparse(full) else np.asarray(full)
                out[name] = full if rows is None else slice_rows(full, 0, *rows)
        return out


def program_task_list(program: Program) -> tuple[list[Task], list[GraphSpec | None]]:
    """The relayouts (host conversions) then every region, in program order, and their graphs."""
    hosts = [Task(r.name, frozenset({r.source}), frozenset({r.tensor}), {}, True) for r in program.relayouts]
    tasks = hosts + [graph_task(g, demand_of(g)) for g in program.graphs]
    return tasks, [None] * len(hosts) + list(program.graphs)


def batched(program: Program, plan: SplitPlan, info: SplitInfo) -> Batched:
    """`program`'s tasks under `plan`: a region `info` says can be cut runs once per micro-batch."""
    whole, specs = program_task_list(program)
    extent = plan.bounds[-1][1]
    tasks: list[Task] = []
    out_specs: list[GraphSpec | None] = []
    region: list[int] = []
    rows: list[tuple[int, int] | None] = []
    cuts: dict[int, RegionCut] = {}
    members: dict[int, list[int]] = {}  # program task -> its tasks here
    for p, (t, spec) in enumerate(zip(whole, specs)):
        cut = None
        if spec is not None and plan.k > 1 and info.regions.get(spec.name, "") is None:
            c = cut_region(spec, program.assigns.get(spec.name, ()), extent)
            cut = c if isinstance(c, RegionCut) else None
        if cut is None:
            members[p] = [len(tasks)]
            tasks.append(t)
            out_specs.append(spec)
            region.append(p)
            rows.append(None)
            continue
        assert spec is not None
        cuts[p] = cut
        members[p] = []
        for b, (lo, hi) in enumerate(plan.bounds):
            members[p].append(len(tasks))
            tasks.append(replace(t, batch=b))
            out_specs.append(batch_spec(spec, cut, lo, hi, b))
            region.append(p)
            rows.append((lo, hi))
    deps = _dependencies(whole, specs, cuts, members, tasks)
    whole_specs = {p: s for p, s in enumerate(specs) if s is not None}
    return Batched(plan, tasks, deps, out_specs, region, rows, cuts, whole_specs)


def _dependencies(whole, specs, cuts, members, tasks) -> list[frozenset[int]]:
    last_writer: dict[str, int] = {}
    deps: list[frozenset[int]] = [frozenset()] * len(tasks)
    for p, t in enumerate(whole):
        local = _row_local_reads(specs[p], cuts.get(p))
        for i in members[p]:
            need: set[int] = set()
            for name in t.reads:
                w = last_writer.get(name)
                if w is None:
                    continue
                if name in local and w in cuts:  # the same micro-batch of the producer
                    need.add(members[w][tasks[i].batch])
                else:
                    need.update(members[w])
            deps[i] = frozenset(need)
        for name in t.writes:
            last_writer[name] = p
    return deps


def _row_local_reads(spec: GraphSpec | None, cut: RegionCut | None) -> set[str]:
    """Tensors a cut region reads by their rows: its inputs sliced at dimension 0, under their own
    name and that of the plain tensor they copy."""
    if spec is None or cut is None:
        return set()
    out = set()
    for name, t in spec.tensors.items():
        if t.role == "input" and cut.row_local(name):
            out.add(name)
            if t.copy_of and views.parse(t.copy_of) is None:
                out.add(t.copy_of)
    return out


def run_batches(b: Batched, env: Mapping[str, Any], cycles: Sequence[int], arch: Arch) -> list[int]:
    """Each task's own cycles, alone on the machine: a whole task's are `cycles` (the program's
    run); a micro-batch is simulated on its rows, and its outputs must be those rows of the
    unsplit run's, bit for bit."""
    out = []
    for i, spec in enumerate(b.specs):
        if b.rows[i] is None or spec is None:
            out.append(int(cycles[b.region[i]]))
            continue
        run = run_graph(spec, b.inputs(i, env), arch)
        check_batch(spec.name, run.outputs, b.expected(i, env))
        out.append(run.cycles)
    return out


def check_batch(name: str, got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray]) -> None:
    """A micro-batched run must give the unsplit run's rows exactly: any difference is a wrong answer."""
    for out, w in want.items():
        if out in got and not np.array_equal(got[out], w, equal_nan=True):
            raise MismatchError(f"micro-batch {name}: its rows of {out} differ from the unsplit run's")
