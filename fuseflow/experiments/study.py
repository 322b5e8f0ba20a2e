"""``fuseflow study``: one model under several fusion schedules, each point measured alike
(`point.measure`), with the speedup of each over ``unfused``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fuseflow.experiments.point import measure


def study(
    built: tuple,
    schedules: Sequence[tuple[str, Any]],
    *,
    base: Any = None,
    order: Any = None,
    node_budget: int = 100_000,
    arch: Any = None,
    strategy: str = "sequential",
    engine: str = "auto",
    memo: Any = None,
    jobs: int = 1,
    sample: Any = None,
    stage: Callable[[str, str], None] | None = None,
    progress: Callable[[str, str, int], None] | None = None,
    done: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """One row per (name, schedule): regions, cycles (the makespan), region cycles, the estimate,
    ALU ops, reductions, memory bytes, the error against PyTorch, compile and simulate seconds,
    and ``speedup_vs_unfused``. A schedule that fails is a row with its ``error``, and the study
    goes on. `base` is the program compiled ``unfused`` (reused for that row). `stage(name, what)`
    and `progress(name, region, cycle)` report as points run; `done(name)` after each."""
    rows = []
    for name, sched in schedules:
        on_stage = _bound(stage, name)
        on_progress = _bound(progress, name)
        got = measure(
            built,
            schedule=sched,
            order=order,
            node_budget=node_budget,
            arch=arch,
            strategy=strategy,
            program=base if name == "unfused" else None,
            engine=engine,
            memo=memo,
            jobs=jobs,
            sample=sample,
            stage=on_stage,
            progress=on_progress,
        )
        rows.append(_study_row(name, got))
        if done:
            done(name)
    base_cycles = next((r.get("cycles") for r in rows if r["schedule"] == "unfused"), None)
    for r in rows:
        r["speedup_vs_unfused"] = round(base_cycles / r["cycles"], 3) if base_cycles and "cycles" in r else None
    return rows


def _bound(report: Callable[..., None] | None, name: str) -> Callable[..., None] | None:
    """`report` with the schedule's name as its first argument."""
    return (lambda *args: report(name, *args)) if report else None


def _study_row(name: str, got: dict[str, Any]) -> dict[str, Any]:
    if got["status"] != "ok":
        error = got["status"].removeprefix("failed: ")
        return {"schedule": name, "error": error, "compile_s": None, "simulate_s": None}
    s = got["seconds"]
    return {
        "schedule": name,
        "regions": got["regions"],
        "cycles": got["cycles"],
        "region_cycles": got["region_cycles"],
        "estimated_cycles": got["estimated_cycles"],
        "alu_ops": got["alu_ops"],
        "reductions": got["reductions"],
        "mem_read_bytes": got["mem_read_bytes"],
        "mem_write_bytes": got["mem_write_bytes"],
        "max_abs_error": got["max_abs_error"],
        "lanes": got.get("lanes", 1),
        "busy": got.get("busy"),
        **({"interval": got["interval"], "sampled": got["sampled"]} if "sampled" in got else {}),
        "compile_s": round(s.get("compile", 0.0), 2),
        "simulate_s": round(s.get("simulate", 0.0), 2),
    }
