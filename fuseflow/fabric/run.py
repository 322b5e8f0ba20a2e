"""A simulated program's timeline: its regions (or their micro-batches) placed on the fabric by a
strategy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from fuseflow import views
from fuseflow.cost.cycle_model import estimate_graph
from fuseflow.cost.input_stats import stats_for_inputs
from fuseflow.cost.timing import Timing
from fuseflow.errors import FuseflowError
from fuseflow.fabric.batches import Batched, batched, program_task_list, run_batches
from fuseflow.fabric.dag import Task
from fuseflow.fabric.scheduler import FabricState, Span, timeline_from_durations
from fuseflow.fabric.shared_run import shared_timeline
from fuseflow.fabric.split import SplitInfo, SplitPlan, slice_rows, split_info
from fuseflow.fabric.strategy import BUILTIN, Auto, Strategy, resolve
from fuseflow.fabric.templates import TemplateRunner
from fuseflow.sim.arch import Arch
from fuseflow.sim.values import region_values

if TYPE_CHECKING:
    from fuseflow.program import Program


@dataclass
class Placement:
    """Where and when every task ran: the `timeline`, the strategy that made it (``auto`` names
    its choice: ``auto(pipeline:4)``), the split it ran under (None: the rows whole) and, for
    ``auto``, the predicted makespan of every candidate it weighed."""

    timeline: list[Span]
    strategy: str
    split: SplitPlan | None = None
    considered: dict[str, float] = field(default_factory=dict)


def program_tasks(program: Program) -> list[Task]:
    """The relayouts (host conversions) then every region, in program order."""
    return program_task_list(program)[0]


def predicted_cycles(program: Program, args: tuple, arch: Arch) -> list[float]:
    """The cycle model's cycles per task: what a strategy ranks by before anything has run."""
    return predictions(program, args, arch)[0]


def predictions(program: Program, args: tuple, arch: Arch) -> tuple[list[float], list[float]]:
    """The cycle model's cycles and off-chip bytes per task."""
    regions = program.estimate(*args, arch=replace(arch, fabric=None)).regions
    return [float(r.cycles) for r in regions], [float(r.mem_bytes) for r in regions]


def row_extent(program: Program) -> int:
    """The rows a split cuts: the first dimension of the program's first output (1 for a scalar)."""
    if not program.output_names:
        return 1
    name = program.output_names[0]
    for g in program.graphs:
        t = g.tensors.get(name)
        if t is not None and t.role == "output":
            return t.shape[0] if t.shape else 1
    return 1


def info_for(program: Program, env: Mapping[str, Any]) -> SplitInfo:
    """What a strategy's `split` sees of `program` on the inputs in `env`."""
    return split_info(program.graphs, program.assigns, env, row_extent(program))


def plan_for(strategy: Strategy, info: SplitInfo) -> SplitPlan:
    """`strategy.split(info)`, checked: contiguous ranges that cover the rows."""
    plan = strategy.split(info)
    b = plan.bounds
    if (
        not b
        or b[0][0] != 0
        or b[-1][1] != info.extent
        or any(lo >= hi for lo, hi in b)
        or any(x[1] != y[0] for x, y in zip(b, b[1:]))
    ):
        raise FuseflowError(
            f"strategy {strategy.name}: its split {list(plan.bounds)} does not cut rows 0..{info.extent} "
            "into contiguous, non-empty ranges"
        )
    return plan


def needs_values(strategy: str | Strategy, arch: Arch) -> bool:
    """Whether `place` reads every tensor after the run (a shared run re-simulates the regions
    together; micro-batches slice intermediates), so `simulate` must keep them."""
    s = resolve(strategy)
    return (
        shares_memory(s, arch)
        or isinstance(s, Auto)
        or type(s) not in BUILTIN.values()  # a user strategy may run templates
        or type(s).split is not Strategy.split
    )


def shares_memory(strategy: str | Strategy, arch: Arch) -> bool:
    """Whether `place` will run the regions together (so `simulate` must keep every input)."""
    return arch.memory_model and not _one_at_a_time(resolve(strategy))


def place(
    program: Program,
    cycles: Sequence[int],
    arch: Arch,
    strategy: str | Strategy,
    args: tuple,
    env: Mapping[str, Any] | None = None,
    predicted: Sequence[float] | None = None,
) -> Placement:
    """Each task's span. `cycles` are the program's tasks' own cycles (alone on the machine);
    `env` holds every tensor of the run when `needs_values` (else None). With the memory model
    on and a strategy other than the sequential one, the tasks run in one engine run sharing its
    channels; otherwise spans follow from each task's own cycles exactly."""
    chosen = resolve(strategy)
    if isinstance(chosen, Auto):
        assert env is not None
        return _auto(program, cycles, arch, chosen, args, env)
    splits = type(chosen).split is not Strategy.split
    plan = plan_for(chosen, info_for(program, env if env is not None else program.bind(args))) if splits else None
    if plan is not None and plan.k > 1:
        assert env is not None
        return _place_split(program, plan, cycles, arch, chosen, args, env)
    tasks = program_tasks(program)
    sequential = _one_at_a_time(chosen)
    traffic = None
    if not sequential and predicted is None:
        predicted, traffic = predictions(program, args, arch)
    if sequential or not arch.memory_model or env is None:
        runner = None
        if env is not None:
            specs = program_task_list(program)[1]
            runner = _templates(program, specs, lambda i: env, lambda i: None, env, arch, chosen)
        spans = timeline_from_durations(tasks, cycles, arch.fabric, chosen, predicted, traffic, templates=runner)
        return Placement(spans, chosen.name)
    state = FabricState(tasks, arch.fabric, predicted if predicted is not None else cycles, chosen.name, traffic)
    _, specs = program_task_list(program)
    graphs = {i: g for i, g in enumerate(specs) if g is not None}
    hosts = {i: int(cycles[i]) for i, g in enumerate(specs) if g is None}
    values = {k: np.asarray(v) for k, v in env.items() if isinstance(v, np.ndarray)}
    return Placement(_shared(state, chosen, graphs, hosts, lambda i: env, lambda i: values, arch), chosen.name)


def _place_split(
    program: Program, plan: SplitPlan, cycles: Sequence[int], arch: Arch, chosen: Strategy, args: tuple, env
) -> Placement:
    b = batched(program, plan, info_for(program, env))
    predicted, traffic = task_predictions(b, program, args, arch, env)
    if _one_at_a_time(chosen) or not arch.memory_model:
        durations = run_batches(b, env, cycles, arch)
        runner = _templates(program, b.specs, lambda i: b.inputs(i, env), lambda i: b.rows[i], env, arch, chosen)
        spans = timeline_from_durations(b.tasks, durations, arch.fabric, chosen, predicted, traffic, b.deps, runner)
        return Placement(spans, chosen.name, plan)
    state = FabricState(b.tasks, arch.fabric, predicted, chosen.name, traffic, b.deps)
    graphs = {i: s for i, s in enumerate(b.specs) if s is not None}
    hosts = {i: int(cycles[b.region[i]]) for i, s in enumerate(b.specs) if s is None}
    return Placement(
        _shared(state, chosen, graphs, hosts, lambda i: b.inputs(i, env), lambda i: b.expected(i, env), arch),
        chosen.name,
        plan,
    )


def _templates(program: Program, specs, inputs, rows, env, arch: Arch, chosen: Strategy) -> TemplateRunner:
    """What runs a task's template and checks it against its region's index-notation values (the
    rows of them a micro-batch writes)."""

    names = {g.name for g in program.graphs}

    def expected(i: int) -> dict[str, np.ndarray]:
        spec = specs[i]
        region = spec.name.split("#")[0] if spec is not None else ""
        if region not in names:
            return {}
        values = region_values(program.assigns[region], env)
        r = rows(i)
        return {k: (v if r is None else slice_rows(v, 0, *r)) for k, v in values.items()}

    return TemplateRunner(list(specs), inputs, expected, arch, program.tolerance, chosen.name)


def _shared(state, chosen, graphs, hosts, inputs, expected, arch) -> list[Span]:

    return shared_timeline(state, chosen, graphs, hosts, inputs, expected, arch)


def task_predictions(
    b: Batched, program: Program, args: tuple, arch: Arch, env: Mapping[str, Any]
) -> tuple[list[float], list[float]]:
    """The cycle model's cycles and bytes per task of a split program: a micro-batch is estimated
    on its own rows (a fused region whose rows are an inner loop repeats its outer loops in every
    micro-batch, and this shows it); when its inputs are not at hand, its region's share of work."""

    region_cycles, region_bytes = predictions(program, args, arch)
    timing = Timing.from_settings(arch.settings)
    cycles_out, bytes_out = [], []
    work = b.plan.work
    for i, spec in enumerate(b.specs):
        p, rows = b.region[i], b.rows[i]
        if rows is None or spec is None:
            cycles_out.append(region_cycles[p])
            bytes_out.append(region_bytes[p])
            continue
        ins = b.inputs(i, env) if _has_inputs(b, i, env) else None
        if ins is not None:
            est = estimate_graph(spec, stats_for_inputs(spec, ins), timing)
            cycles_out.append(float(est.cycles))
            bytes_out.append(float(est.mem_bytes))
        else:
            share = work[b.tasks[i].batch or 0] / max(sum(work), 1e-9)
            cycles_out.append(region_cycles[p] * share)
            bytes_out.append(region_bytes[p] * share)
    return cycles_out, bytes_out


def _has_inputs(b: Batched, i: int, env: Mapping[str, Any]) -> bool:
    whole = b.whole[b.region[i]]
    return all(views.has(env, t.copy_of or n) for n, t in whole.tensors.items() if t.role == "input")


def predicted_timeline(
    program: Program, predicted: Sequence[float], args: tuple, arch: Arch, strategy: Strategy, data
) -> tuple[list[Span], SplitPlan | None]:
    """The timeline of the cycle model's figures (`Program.estimate`): the regions' predicted
    cycles, or their micro-batches' under a strategy that splits (``auto``: its choice by the
    model, unconfirmed)."""
    if type(strategy).split is Strategy.split and not isinstance(strategy, Auto):  # the rows whole
        durations = [int(round(c)) for c in predicted]
        return timeline_from_durations(program_tasks(program), durations, arch.fabric, strategy, predicted), None
    info = info_for(program, data)
    if isinstance(strategy, Auto):
        weighed = _weigh(program, info, args, arch, data)
        strategy.considered = {n: float(max((sp.end for sp in w[0]), default=0)) for n, w in weighed.items()}
        best = min(strategy.considered, key=lambda n: strategy.considered[n])
        strategy.chosen = resolve(best)
        return weighed[best]
    plan = plan_for(strategy, info)
    if plan.k == 1:
        durations = [int(round(c)) for c in predicted]
        return timeline_from_durations(program_tasks(program), durations, arch.fabric, strategy, predicted), None
    b = batched(program, plan, info)
    cycles, traffic = task_predictions(b, program, args, arch, data)
    durations = [int(round(c)) for c in cycles]
    return timeline_from_durations(b.tasks, durations, arch.fabric, strategy, cycles, traffic, b.deps), plan


def _weigh(
    program: Program, info: SplitInfo, args: tuple, arch: Arch, env
) -> dict[str, tuple[list[Span], SplitPlan | None]]:
    """`auto`'s candidates placed with the cycle model's figures, in `Auto.CANDIDATES` order
    (a pipeline is left out when no region can be cut or the rows are fewer than K)."""
    region_cycles, region_bytes = predictions(program, args, arch)
    tasks = program_tasks(program)
    out: dict[str, tuple[list[Span], SplitPlan | None]] = {}
    for name in Auto.CANDIDATES:
        s = resolve(name)
        if info.extent < getattr(s, "k", 1):
            continue
        plan = s.split(info)
        if plan.k == 1:
            durations = [round(c) for c in region_cycles]
            out[name] = (timeline_from_durations(tasks, durations, arch.fabric, s, region_cycles, region_bytes), None)
            continue
        b = batched(program, plan, info)
        if not b.cuts:
            continue  # nothing to cut: the same as one micro-batch
        pc, pb = task_predictions(b, program, args, arch, env)
        out[name] = (timeline_from_durations(b.tasks, [round(c) for c in pc], arch.fabric, s, pc, pb, b.deps), plan)
    return out


def _auto(program: Program, cycles: Sequence[int], arch: Arch, auto: Auto, args: tuple, env) -> Placement:
    """The candidate with the shortest predicted makespan, simulated; ``sequential`` when that
    turns out faster (a strategy the model favours can lose to contention it does not predict)."""
    weighed = _weigh(program, info_for(program, env), args, arch, env)
    considered = {n: float(max((sp.end for sp in w[0]), default=0)) for n, w in weighed.items()}
    auto.considered = considered
    ranked = sorted(considered, key=lambda n: considered[n])  # stable: ties keep the simpler
    better = ranked[: ranked.index("sequential")]  # predicted to beat sequential
    near = [n for n in better if considered[n] <= Auto.NEAR * considered[ranked[0]]]
    finalists = better[: max(Auto.FINALISTS, len(near))]
    best = Placement(
        timeline_from_durations(program_tasks(program), cycles, arch.fabric, Strategy()),
        "auto(sequential)",
        None,
        considered,
    )
    auto.chosen = Strategy()
    for name in finalists:
        run = place(program, cycles, arch, name, args, env)
        if max(s.end for s in run.timeline) < max(s.end for s in best.timeline):
            auto.chosen = resolve(name)
            best = Placement(run.timeline, f"auto({name})", run.split, considered)
    return best


def _one_at_a_time(strategy: Strategy) -> bool:
    """The base class's schedule: one region at a time never shares the memory with another, so
    each region's own run is its timing (and no shared run is needed)."""
    return type(strategy).schedule is Strategy.schedule
