"""Regions that run at the same time, simulated in one engine run that shares the memory model.

Each region is a part of one C++ graph (`Graph.begin_part`); the engine calls back when a part's
writers finish, and the `Scheduler` answers with the parts to start and the cycle each starts
at. Timing is exact under contention: requests of concurrently running regions queue on the
same channels. Values do not depend on timing; every region's outputs are checked against
those of the runs that computed them (`Program.simulate`).
"""

from __future__ import annotations

import heapq
import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

import fuseflow._simulator as _simulator
from fuseflow.errors import FuseflowError, MismatchError, SimulationError
from fuseflow.fabric.scheduler import FabricState, Span
from fuseflow.fabric.strategy import Context, Strategy, run_schedule
from fuseflow.sim.arch import Arch
from fuseflow.sim.graph import GraphSpec, add_nodes, decode_outputs, pack_inputs


def shared_timeline(
    state: FabricState,
    strategy: Strategy,
    graphs: Mapping[int, GraphSpec],
    host_cycles: Mapping[int, int],
    inputs: Callable[[int], Mapping[str, Any]],
    expected: Callable[[int], Mapping[str, np.ndarray]],
    arch: Arch,
) -> list[Span]:
    """Run every task of `state` in one engine run, in the order `strategy` issues them: `graphs`
    are the simulated tasks (by task index), `host_cycles` the modelled ones (relayouts);
    `inputs(i)` holds every tensor task i reads, `expected(i)` what its outputs must be."""
    g = _simulator.Graph(arch.settings)
    part_of: dict[int, int] = {}
    task_of: list[int] = []
    ranges: list[tuple[int, int]] = []
    for i, spec in graphs.items():
        part_of[i] = g.begin_part()
        task_of.append(i)
        first = len(g)
        add_nodes(g, spec, pack_inputs(spec, inputs(i)))
        ranges.append((first, len(g)))
    driver = _EngineDriver(state, strategy, part_of, task_of, host_cycles)
    try:
        res = g.run(arch.max_cycles, engine="event", release=driver.release)
    except _simulator.SimError as e:
        # the engine's own error first (a region's protocol violation must not read as a
        # strategy's omission), then a region the strategy left, which may be why it stopped
        try:
            state.check_all_started()
            left = ""
        except FuseflowError as omission:
            left = f" ({omission})"
        raise SimulationError(f"shared run of {len(graphs)} regions: {e}{left}") from None
    finally:
        driver.close()
    driver.drain([int(finish) for _, finish in res["parts"]])
    state.check_all_started()
    for p, (first, end) in enumerate(ranges):
        spec = graphs[task_of[p]]
        want_all = expected(task_of[p])
        for name, got in decode_outputs(spec, res["nodes"][first:end]).items():
            want = want_all.get(name)
            if want is not None and not np.array_equal(got, want, equal_nan=True):
                raise MismatchError(f"region {spec.name}: its shared run wrote other values for {name}")
    return [state.span(i, driver.ends[i]) for i in range(len(state.tasks))]


class _EngineDriver:
    """Runs the strategy in a thread of its own and hands control back and forth with the engine:
    the engine calls `release` when a part's writers finish; the strategy's `wait` hands the
    parts it issued to the engine and blocks until the engine reports the next finished part.
    Host tasks (relayouts) end at known cycles: they are reported in time order, before any
    engine event at a later cycle (or at once when no part runs). While parts run, the hand-over
    asks the engine for a call at the next host task's end (a timer entry, `(-1, cycle)`), so the
    engine stops there unless a part finishes first, and what the strategy then issues starts at
    that cycle, not at the engine's next finished part."""

    def __init__(self, state: FabricState, strategy: Strategy, part_of, task_of, host_cycles):
        self.state, self.strategy = state, strategy
        self.part_of, self.task_of, self.host_cycles = part_of, task_of, host_cycles
        self.now = 0
        self.ends: dict[int, int] = {}
        self.pending: list[tuple[int, int]] = []  # (part, start) issued since the last hand-over
        self.running: set[int] = set()  # parts started and not reported finished
        self.hosts: list[tuple[int, int]] = []  # (end, task) of host tasks not yet reported
        self.held: tuple[int, int] | None = None  # an engine event kept back behind a host one
        self.to_engine: queue.Queue = queue.Queue()
        self.to_strategy: queue.Queue = queue.Queue()
        self.thread: threading.Thread | None = None
        self.done = False

    # --- the strategy's side (its own thread) ---
    def issue(self, i: int, template: Any = None) -> None:
        if template is not None:
            raise FuseflowError(
                f"strategy {self.state.name}: region {self.state.tasks[i].label} was issued with a template; "
                "templates run with known durations, not in a run whose regions share the memory model "
                "(use an arch without the memory model)"
            )
        begin = self.state.begin(i, self.now)
        if i in self.part_of:
            self.pending.append((self.part_of[i], begin))
            self.running.add(i)
        else:
            heapq.heappush(self.hosts, (begin + int(self.host_cycles[i]), i))

    def wait(self) -> int | None:
        if self.held is None and self.running:
            timer = [(-1, self.hosts[0][0])] if self.hosts else []
            self.to_engine.put(("start", self.pending + timer))
            self.pending = []
            msg = self.to_strategy.get()
            if msg[0] == "stop":
                raise _Stopped()
            if msg[0] == "timer":  # the engine reached the next host task's end first
                end, i = heapq.heappop(self.hosts)
                return self._finished(i, max(end, self.now))
            self.held = (msg[1], msg[2])
        if self.hosts and (self.held is None or self.hosts[0][0] <= self.held[1]):
            end, i = heapq.heappop(self.hosts)
            return self._finished(i, max(end, self.now))
        if self.held is not None:
            i, cycle = self.held
            self.held = None
            self.running.discard(i)
            return self._finished(i, cycle)
        return None

    def _finished(self, i: int, at: int) -> int:
        self.now = at
        self.state.finish(i, at)
        self.ends[i] = at
        return i

    def _run_strategy(self) -> None:
        try:
            run_schedule(self.strategy, Context(self.state, self))
            self.to_engine.put(("start", self.pending))  # what it issued last
            self.pending = []
            self.to_engine.put(("exit", []))
        except _Stopped:
            pass
        except BaseException as e:  # raised in the engine's thread, which stops the run
            self.to_engine.put(("error", e))

    # --- the engine's side ---
    def release(self, done: int, cycle: int) -> list[tuple[int, int]]:
        if done == -1:
            self.thread = threading.Thread(target=self._run_strategy, daemon=True)
            self.thread.start()
        elif done == -2:  # the timer of the last hand-over: a host task ends now
            if self.done:
                return []
            self.to_strategy.put(("timer", cycle))
        elif not self.done:
            self.to_strategy.put(("finished", self.task_of[done], cycle))
        else:
            return []
        starts: list[tuple[int, int]] = []
        while True:
            kind, payload = self.to_engine.get()
            if kind == "error":
                self.done = True
                raise payload
            starts.extend(payload)
            if kind == "exit":
                self.done = True
                return starts
            if kind == "start" and (payload or not self.done):
                return starts

    def drain(self, finishes: list[int]) -> None:
        """After the run: the parts that finished last, in the order they finished."""
        for p in sorted(range(len(finishes)), key=lambda p: finishes[p]):
            i = self.task_of[p]
            if i not in self.ends:
                self.running.discard(i)
                self._finished(i, finishes[p])
        while self.hosts:
            end, i = heapq.heappop(self.hosts)
            self._finished(i, end)

    def close(self) -> None:
        if self.thread is not None and self.thread.is_alive():
            self.to_strategy.put(("stop", 0, 0))
            self.thread.join(timeout=10)


class _Stopped(Exception):
    """The engine stopped: the strategy thread unwinds."""
