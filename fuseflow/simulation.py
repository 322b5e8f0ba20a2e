"""Simulation orchestration: run a compiled `Program`'s regions in order (or memoised, or in
parallel), release intermediates no later region reads, place the runs on the fabric, and
return the `SimResult` that `check()` compares with PyTorch. `Program.simulate` calls `simulate`.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from fuseflow.errors import FuseflowError, MismatchError
from fuseflow.executor import LocalExecutor
from fuseflow.fabric.resources import check_fits
from fuseflow.fabric.run import needs_values, place
from fuseflow.fabric.strategy import resolve
from fuseflow.progress import progress_reporter
from fuseflow.results import RegionResult, SimResult
from fuseflow.sampling.program import SampleSummary, makespan_interval, simulate_sampled
from fuseflow.sampling.spec import SampleSpec
from fuseflow.sampling.window import Job
from fuseflow.sim.arch import Arch
from fuseflow.sim.components import independent, parts, run_parts
from fuseflow.sim.graph import GraphRun, pack_inputs, run_graph, run_packed
from fuseflow.sim.memo import RegionMemo, as_memo, structure_key
from fuseflow.sim.pieces import run_in_pieces, run_piece
from fuseflow.sim.values import Unevaluable, region_values

if TYPE_CHECKING:
    from fuseflow.program import Program


@dataclass(frozen=True)
class SimOptions:
    """How a program is simulated: `Program.simulate`'s keywords as one value (its docstring
    says what each does), handed down to the paths that run the regions."""

    arch: Any = None
    record: bool = False
    spans: bool = False
    progress: Any = None
    engine: str = "auto"
    memo: Any = None
    jobs: int = 1
    executor: Any = None
    strategy: Any = "sequential"
    sample: Any = None
    pieces: int | Sequence[str] | None = None
    checkpoint: str | os.PathLike | None = None
    every: str | float | None = None

    @property
    def parallel(self) -> bool:
        """Regions (or pieces) run in worker processes."""
        return self.jobs > 1 or self.executor is not None

    def check(self, memo: Any, target: SampleSpec | None) -> None:
        """Refuse combinations that cannot run, before anything does."""
        if (memo is not None or self.parallel) and (self.record or self.spans):
            raise FuseflowError("record and spans need every region simulated in order: not with memo or jobs")
        if self.every is not None and self.checkpoint is None:
            raise FuseflowError("every= saves states in the checkpoint directory: give checkpoint= too")
        if target is not None and (self.pieces is not None or self.checkpoint is not None):
            raise FuseflowError("sample= estimates, pieces= and checkpoint= run exactly: choose one")

    @property
    def every_seconds(self) -> float | None:
        """`every` in seconds: a number, or ``"90s"``, ``"10m"``, ``"2h"``."""
        return None if self.every is None else seconds(self.every)


def seconds(every: str | float) -> float:
    """``"90s"`` / ``"10m"`` / ``"2h"`` / a number of seconds -> seconds (at least 0)."""
    text = str(every).strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600}.get(text[-1:])
    try:
        value = float(text[:-1] if scale else text) * (scale or 1)
    except ValueError:
        raise FuseflowError(f"every: {every!r} is not a duration (e.g. 90s, 10m, 2h, or seconds)") from None
    if value < 0:
        raise FuseflowError(f"every: {every!r} is negative")
    return value


def simulate(prog: Program, args: tuple, o: SimOptions) -> SimResult:
    """`Program.simulate`: run the regions by the path `o` asks for, then place them."""

    args = tuple(args) if args else prog.example_args
    arch_ = Arch.resolve(o.arch if o.arch is not None else prog.arch)
    strategy_ = resolve(o.strategy)  # a bad name or file fails before anything runs
    check_fits(prog.resources().items(), arch_.fabric, arch_.name)
    shared = needs_values(strategy_, arch_)  # regions re-run together or split: keep every tensor
    env = prog.bind(args)
    memo_ = as_memo(o.memo)
    target = SampleSpec.of(o.sample)
    o.check(memo_, target)
    if o.checkpoint is not None and o.pieces is None:  # each region one piece: kept when done, resumable
        o = replace(o, pieces=1)
    summary, traces = None, None
    if target is not None:
        _check_sampling(o.record, o.spans, shared, strategy_.name)
        regions, summary = _simulate_sampled(prog, env, args, arch_, target, o, memo_ is not None)
    elif o.pieces is not None and memo_ is None:
        _check_pieces(o, memo_, prog)
        regions = _simulate_pieces(prog, env, arch_, o, shared, _predicted_tokens(prog, args, arch_, o))
    elif memo_ is not None or o.parallel:
        if o.pieces is not None:
            _check_pieces(o, memo_, prog)
        regions = _simulate_shared(prog, env, arch_, memo_, o, not shared, _predicted_tokens(prog, args, arch_, o))
    else:
        regions, traces = _simulate_in_order(prog, env, arch_, o, shared)

    outs = tuple(_as_returned(prog, i, env[n]) for i, n in enumerate(prog.output_names))
    runs_ = prog.relayout_runs(env) + regions
    placed = place(prog, [r.cycles for r in runs_], arch_, strategy_, args, env if shared else None)
    res = SimResult(prog, args, outs, runs_, arch_, timeline=placed.timeline, strategy=placed.strategy)
    res.split, res.considered = placed.split, placed.considered
    res.traces = traces
    if summary is not None:
        res.sampled = summary
        res.interval = _makespan_interval(prog, runs_, res.cycles, arch_, strategy_, args)
    return res


def _simulate_in_order(prog: Program, env: dict, arch: Arch, o: SimOptions, shared: bool) -> tuple[list, list | None]:
    """Every region simulated here, in program order (traces and spans need this path)."""
    runs: list[GraphRun] = []
    with progress_reporter(o.progress) as report:
        for g in prog.graphs:
            cb = (lambda cycle, name=g.name: report(name, cycle)) if report else None
            run = run_graph(g, env, arch, record=o.record, spans=o.spans, progress=cb, engine=o.engine)
            env.update(run.outputs)
            if not shared:
                _release(prog, env, len(runs))
            runs.append(run)
    regions = [RegionResult(r.name, r.cycles, r.nodes, r.writes, r.engine, spill=r.spill) for r in runs]
    return regions, ([r.traces for r in runs] if o.record else None)


def _check_sampling(record: bool, spans: bool, shared: bool, strategy: str) -> None:
    """Sampling estimates each region alone: refuse what needs every region simulated whole."""
    if record or spans:
        raise FuseflowError("sample= estimates regions from parts of their rows: not with record or spans")
    if shared:
        raise FuseflowError(
            f"sample= places each region by its estimated cycles; strategy {strategy} re-simulates regions "
            "together (memory model) or cuts them into micro-batches: use sequential, or concurrent without "
            "the memory model"
        )


def _check_pieces(o: SimOptions, memo, prog: Program) -> None:
    if o.record or o.spans:
        raise FuseflowError("pieces= runs each region from recorded streams: not with record or spans")
    if memo is not None and o.parallel:
        raise FuseflowError("pieces= with memo runs regions in order, each in pieces here: not with jobs or executor")
    if isinstance(o.pieces, (list, tuple)):
        known = {n.name for g in prog.graphs for n in g.nodes}
        missing = [p for p in o.pieces if p not in known]
        if missing:
            raise FuseflowError(f"pieces: no node named {missing[0]!r} in any region")


def _predicted_tokens(prog: Program, args: tuple, arch: Arch, o: SimOptions) -> dict[str, list[float]]:
    """Each region's predicted tokens per node (the cycle model), where a count of pieces is
    cut: cuts fall where the fewest predicted tokens cross (sim/pieces.py, `boundaries`)."""
    if not isinstance(o.pieces, int) or o.pieces <= 1:
        return {}
    est = prog.estimate(*args, arch=replace(arch, fabric=None))
    return {r.name: [n.tokens for n in r.nodes] for r in est.regions}


def _cut(g, o: SimOptions) -> bool:
    """Whether region `g` runs in pieces: under a count (or a checkpoint) every region does; under
    node names, those regions that hold one."""
    return o.pieces is not None and (isinstance(o.pieces, int) or bool(_pieces_of(g, o.pieces)))


def _by_parts(g, o: SimOptions) -> bool:
    """Whether a memoised region may run part by part: unless cut in pieces, or kept whole as one
    checkpointed piece (``pieces=1``, what `checkpoint` alone asks), in which case each part is one."""
    return not _cut(g, o) or o.pieces == 1


def _pieces_of(g, pieces):
    """A region's share of `pieces`: the count, or the named nodes that are its own."""
    return pieces if isinstance(pieces, int) else [p for p in pieces if any(n.name == p for n in g.nodes)]


def _simulate_pieces(
    prog: Program, env: dict, arch: Arch, o: SimOptions, shared: bool, tokens: Mapping[str, list[float]]
) -> list[RegionResult]:
    """Every region run in pieces (fuseflow/sim/pieces.py), in program order; with `jobs` or an
    `executor`, each piece in a worker (one after another: a piece reads the tapes of those before)."""

    runner = _piece_runner(o.executor) if o.parallel else None
    names = [g.name for g in prog.graphs]
    out = []
    with progress_reporter(o.progress) as report:
        for i, g in enumerate(prog.graphs):
            cb = (lambda piece, cycle, name=g.name: report(f"{name} {piece}", cycle)) if report else None
            run, summary = run_in_pieces(
                g,
                pack_inputs(g, env),
                arch,
                _pieces_of(g, o.pieces),
                o.checkpoint,
                o.engine,
                runner,
                cb,
                tokens.get(g.name),
                o.every_seconds,
            )
            env.update(run.outputs)
            if not shared:
                _release(prog, env, i)
            out.append(RegionResult(names[i], run.cycles, run.nodes, run.writes, run.engine, pieces=summary))
    return out


def _piece_runner(executor: Any):
    """Runs a piece in a worker: the executor's, or a fresh process per piece (its memory goes
    back to the machine when the piece ends)."""

    if executor is not None:
        return lambda *task: next(iter(executor.run(run_piece, [task])))[1]

    def run(*task):
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
            return pool.submit(run_piece, *task).result()

    return run


def _simulate_sampled(
    prog: Program, env: dict, args: tuple, arch: Arch, target: SampleSpec, o: SimOptions, memoise: bool
) -> tuple[list[RegionResult], SampleSummary]:
    """`simulate` with the large row-local regions sampled (fuseflow/sampling); `memoise`: a
    region identical to one before takes its result (`sampling.program.copy_of`)."""

    def run(units: Sequence[Job]) -> list[GraphRun]:
        if not o.parallel:
            return [run_packed(s, pack, arch, engine=o.engine) for s, pack in units]

        pool = o.executor or LocalExecutor(o.jobs)
        out: list = [None] * len(units)
        for i, r in pool.run(run_packed, [(s, pack(), arch, False, False, None, o.engine) for s, pack in units]):
            out[i] = r
        return out

    with progress_reporter(o.progress) as report:
        return simulate_sampled(
            prog,
            env,
            args,
            arch,
            target,
            run,
            lambda g: run_graph(g, env, arch, engine=o.engine),
            lambda i: _release(prog, env, i),
            report,
            (lambda g: structure_key(g, pack_inputs(g, env), arch)) if memoise else None,
        )


def _makespan_interval(prog: Program, runs: list, makespan: int, arch: Arch, strategy, args) -> tuple[int, int]:

    def makespan_of(cycles: list[int]) -> int:
        return max(s.end for s in place(prog, cycles, arch, strategy, args).timeline)

    return makespan_interval(runs, makespan, strategy.name == "sequential", makespan_of)


def _simulate_shared(
    prog: Program,
    env: dict,
    arch: Arch,
    memo,
    o: SimOptions,
    release: bool = True,
    tokens: Mapping[str, list[float]] | None = None,
) -> list:
    """`simulate` with a memo and/or in parallel; fills `env` with every region's outputs.
    With `o.pieces`, each region simulated here runs in pieces (sim/pieces.py)."""

    memoise = memo is not None  # without a memo, identical regions are each simulated
    memo = memo if memo is not None else RegionMemo()
    parallel = o.parallel
    results: dict[int, RegionResult] = {}
    tasks: list[tuple] = []  # (spec, packed, arch, engine) run by the executor
    waiting: dict[str, list[int]] = {}  # key -> regions that take the run of its first task
    keys: dict[int, str | None] = {}
    evaluated: dict[int, dict] = {}
    with progress_reporter(o.progress) as report:
        for i, g in enumerate(prog.graphs):
            packed = pack_inputs(g, env)
            keys[i] = key = structure_key(g, packed, arch) if memoise else None
            hit = memo.get(key)
            try:
                values = region_values(prog.assigns[g.name], env) if (hit or parallel or key in waiting) else None
            except Unevaluable:
                values = None
            if values is not None and hit is not None:
                results[i] = RegionResult(g.name, hit.cycles, hit.for_graph(g), list(values), hit.engine, True)
            elif values is not None and key is not None and key in waiting:
                waiting[key].append(i)
            elif values is not None and parallel:
                if key is not None:
                    waiting[key] = [i]
                tasks.append((i, (g, packed, arch, False, False, None, o.engine)))
                evaluated[i] = values
            elif memoise and _by_parts(g, o) and independent(arch) and len(split := parts(g)) > 1:
                # heads: each memoised (a region cut in named pieces runs as one graph)
                results[i], values = _run_parts_here(prog, g, split, env, arch, memo, o, report)
            else:  # in order, here: later regions read its outputs
                once = [packed]  # handed over, so the packed arrays die once the C++ graph holds them
                del packed
                run, summary = _run_here(g, once, env, arch, o, report, (tokens or {}).get(g.name))
                memo.put(key, run)
                values = run.outputs
                results[i] = RegionResult(g.name, run.cycles, run.nodes, run.writes, run.engine, pieces=summary)
            env.update(values)
            if release:
                _release(prog, env, i)
    if tasks:
        pool = o.executor or LocalExecutor(o.jobs)
        for t, run in pool.run(run_packed, [task for _, task in tasks]):
            i = tasks[t][0]
            g = prog.graphs[i]
            _agrees(prog, g.name, run.outputs, evaluated[i])
            memo.put(keys[i], run)
            results[i] = RegionResult(g.name, run.cycles, run.nodes, run.writes, run.engine, spill=run.spill)
            if prog.output_names and set(run.outputs) & set(prog.output_names):
                env.update({n: v for n, v in run.outputs.items() if n in prog.output_names})
    for key, idxs in waiting.items():
        first = results[idxs[0]]
        for i in idxs[1:]:
            g, hit = prog.graphs[i], memo.get(key)
            results[i] = RegionResult(g.name, hit.cycles, hit.for_graph(g), first.writes, hit.engine, True)
    return [results[i] for i in range(len(prog.graphs))]


def _run_parts_here(prog: Program, g, split, env: dict, arch: Arch, memo, o: SimOptions, report):
    """A region whose independent parts (heads) are each memoised; its result and outputs."""
    cb = (lambda cycle, name=g.name: report(name, cycle)) if report else None

    def evaluate():
        try:
            return region_values(prog.assigns[g.name], env)
        except Unevaluable:
            return None

    pr = run_parts(
        g,
        split,
        env,
        arch,
        memo,
        evaluate,
        progress=cb,
        engine=o.engine,
        checkpoint=o.checkpoint,
        every=o.every_seconds,
    )
    region = RegionResult(
        g.name,
        pr.cycles,
        pr.nodes,
        list(pr.outputs),
        pr.engine,
        pr.memoised,
        pieces=pr.pieces,
        spill=_spill_of(pr.spill),
    )
    return region, pr.outputs


def _spill_of(spills: list[dict]) -> dict | None:
    """Queues on disk over a region's simulated parts: queues and bytes added up, the peak the largest part's."""
    if not spills:
        return None
    return {
        "queues": sum(int(s["queues"]) for s in spills),
        "peak_bytes": max(int(s["peak_bytes"]) for s in spills),
        "bytes_written": sum(int(s["bytes_written"]) for s in spills),
    }


def _run_here(g, once: list, env: dict, arch: Arch, o: SimOptions, report, tokens: list[float] | None):
    """A region run in this process, whole or in pieces; `once` holds its packed inputs, handed
    over so that they die once the C++ graph holds them. Returns the run and its pieces' summary."""
    cb = (lambda cycle, name=g.name: report(name, cycle)) if report else None

    def inputs():
        return once.pop() if once else pack_inputs(g, env)

    if not _cut(g, o):
        return run_packed(g, inputs, arch, progress=cb, engine=o.engine), None
    by_piece = (lambda piece, cycle, name=g.name: report(f"{name} {piece}", cycle)) if report else None
    pieces = _pieces_of(g, o.pieces)
    return run_in_pieces(g, inputs(), arch, pieces, o.checkpoint, o.engine, None, by_piece, tokens, o.every_seconds)


def _release(prog: Program, env: dict, done: int) -> None:
    """Drop the intermediates no region after region `done` reads (program outputs and model
    inputs stay): GPT-3 Small's 1,380 regions otherwise keep ~4 GB of values alive."""
    keep = set(prog.output_names) | set(prog.imported.input_names)
    for name in prog.last_readers.get(done, ()):
        if name not in keep:
            env.pop(name, None)


def _agrees(
    prog: Program, region: str, simulated: Mapping[str, np.ndarray], evaluated: Mapping[str, np.ndarray]
) -> None:
    """A region simulated on evaluated inputs must reproduce the evaluation (check()'s tolerance)."""
    tol = prog.tolerance
    for name, got in simulated.items():
        want = evaluated[name]
        if got.shape != want.shape or not np.allclose(got, want, rtol=tol, atol=tol, equal_nan=True):
            diff = np.nanmax(np.abs(got - want)) if got.shape == want.shape else float("nan")
            raise MismatchError(
                f"region {region}: simulated {name} differs from its index-notation values (max abs diff {diff:.3g})"
            )


def _as_returned(prog: Program, i: int, value: np.ndarray) -> torch.Tensor:
    """An output in the shape eager PyTorch returns: a full reduction is 0-d there, while sam
    writes it as one element of a size-1 dense level."""
    out = torch.from_numpy(np.ascontiguousarray(value))
    shapes = prog.imported.output_shapes
    if i < len(shapes) and tuple(out.shape) != shapes[i] and out.numel() == int(np.prod(shapes[i])):
        out = out.reshape(shapes[i])
    return out
