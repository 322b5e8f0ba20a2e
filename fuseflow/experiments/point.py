"""One design point, measured: compile, estimate, simulate, check against PyTorch.

`fuseflow dse`'s workers, `fuseflow study` and the paper benchmarks all measure a point with
`measure`, so a row means the same thing wherever it comes from: the same counters, the same
check, the same failure policy (a point that fails is a row that says why, never a lost sweep).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from typing import Any

import fuseflow
from fuseflow.errors import FuseflowError
from fuseflow.fabric.resources import lanes_of


def measure(
    built: tuple | Callable[[], tuple],
    *,
    schedule: Any = "unfused",
    order: Any = None,
    passes: Any = None,
    node_budget: int = 100_000,
    arch: Any = None,
    strategy: str = "sequential",
    simulate: bool | Callable[[dict], bool] = True,
    program: Any = None,
    engine: str = "auto",
    memo: Any = None,
    jobs: int = 1,
    progress: Callable[[str, int], None] | None = None,
    stage: Callable[[str], None] | None = None,
    sample: Any = None,
) -> dict[str, Any]:
    """One row for `built` = (model, example args, formats), or a function that builds them (a
    model that fails to build is a failed row), under a schedule, order and pipeline.

    Keys: ``status`` (``ok`` or ``failed: <first line>``, with ``traceback`` for a bug),
    ``regions``, ``estimated_cycles``/``estimated_alu_ops``/``estimated_mem_bytes``, and when
    simulated ``cycles`` (the makespan), ``region_cycles`` (regions one after another),
    ``alu_ops``, ``reductions``, ``mem_read_bytes``, ``mem_write_bytes``, ``memoised_regions``,
    ``max_abs_error`` (the simulated outputs against eager PyTorch, `SimResult.check`),
    ``lanes`` (the most lanes of any region) and on a finite fabric ``busy`` (busy units over
    capacity per class);
    ``chosen_schedule``/``chosen_strategy``/``split`` when ``auto`` chose; ``seconds`` per stage;
    with `sample` (`Program.simulate`'s), ``interval`` and ``sampled`` (units simulated of total).
    `simulate` may be a function of the row so far (after the estimate) that says whether to
    simulate. `program` reuses a compiled program instead of compiling. `stage` is told each
    stage's name as it starts (progress bars)."""

    row: dict[str, Any] = {"status": "ok", "seconds": {}}
    seconds = row["seconds"]
    say = stage or (lambda _name: None)
    t = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        seconds[name] = round(now - t, 3)
        t = now

    try:
        model, args, formats = built() if callable(built) else built
        say("compile")
        prog = program or fuseflow.compile(
            model, args, formats, schedule=schedule, order=order, passes=passes, node_budget=node_budget, arch=arch
        )
        lap("compile")
        est = prog.estimate(arch=arch, strategy=strategy)
        lap("estimate")
        row.update(
            regions=len(prog.graphs),
            estimated_cycles=int(est.cycles),
            estimated_alu_ops=int(est.alu_ops),
            estimated_mem_bytes=int(est.mem_bytes),
        )
        if prog.plan is not None:
            row["chosen_schedule"] = repr(prog.plan.schedule)
        if simulate if isinstance(simulate, bool) else simulate(row):
            say("simulate")
            res = prog.simulate(
                arch=arch, strategy=strategy, engine=engine, memo=memo, jobs=jobs, progress=progress, sample=sample
            )
            lap("simulate")
            err = res.check()
            lap("check")
            row.update(simulated_row(prog, res, err, strategy))
    except FuseflowError as e:
        row["status"] = f"failed: {str(e).splitlines()[0][:300]}"
    except Exception as e:  # a bug must not lose the sweep; the row says what happened
        row["status"] = f"failed: {type(e).__name__}: {e}"[:300]
        row["traceback"] = traceback.format_exc(limit=5)
    return row


def simulated_row(prog: Any, res: Any, err: float, strategy: str) -> dict[str, Any]:
    """A simulated run's part of a row: the makespan, region cycles, counters, the error against
    PyTorch, lanes; on a finite fabric the busy units; what `auto` chose; the split; and for a
    sampled run its interval and what was sampled."""
    totals = [r.totals() for r in res.regions]
    row: dict[str, Any] = dict(
        cycles=int(res.cycles),
        region_cycles=int(res.serial_cycles),
        alu_ops=int(sum(x["alu_ops"] for x in totals)),
        reductions=int(sum(x["reductions"] for x in totals)),
        mem_read_bytes=int(sum(x["mem_read_bytes"] for x in totals)),
        mem_write_bytes=int(sum(x["mem_write_bytes"] for x in totals)),
        memoised_regions=sum(bool(r.memoised) for r in res.regions),
        max_abs_error=float(err),
        lanes=max((lanes_of(g) for g in prog.graphs), default=1),
    )
    busy = res.utilization.fraction
    if busy is not None:  # a finite fabric: busy units over capacity, over the makespan
        row["busy"] = {k: round(v, 4) for k, v in busy.items()}
    if res.strategy != strategy:  # auto: what it chose
        row["chosen_strategy"] = res.strategy
    if res.split is not None:
        row["split"] = res.split.to_json()
    if res.sampled is not None and res.interval is not None:
        row["interval"] = list(res.interval)
        row["sampled"] = res.sampled.to_json()
    return row
