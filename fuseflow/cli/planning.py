"""``fuseflow estimate``, ``plan`` and ``dse``: the cycle model's preview, the planner, sweeps."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from fuseflow.cli.common import (
    STRATEGY_HELP,
    add_example_file_args,
    add_model_args,
    add_sample_arg,
    compile_example,
    csv_list,
    load_example,
    option_dict,
    print_table,
)
from fuseflow.errors import FuseflowError


def print_estimate(prog, a) -> int:
    """The cycle model's preview of a compiled program (no simulation)."""
    est = prog.estimate(arch=a.arch, strategy=getattr(a, "strategy", "sequential"))
    if getattr(a, "json", False):
        print(json.dumps(est.to_json(detail=getattr(a, "nodes", False)), indent=2))
        return 0
    rows = [
        [
            r.name,
            f"{r.cycles:,.0f}",
            f"{r.tokens:,.0f}",
            f"{r.alu_ops:,.0f}",
            f"{r.mem_bytes:,.0f}",
            f"{r.recompute:.2f}",
            r.bottleneck,
        ]
        for r in est.regions
    ]
    rows.append(["total", f"{est.serial_cycles:,}", "", f"{est.alu_ops:,}", f"{est.mem_bytes:,}", "", ""])
    print_table(
        f"{Path(a.model).name}: estimate, schedule {a.schedule}, arch {est.arch.name} (not simulated)",
        rows,
        ["region", "cycles", "tokens", "alu ops", "memory bytes", "recompute", "bottleneck"],
    )
    if getattr(a, "nodes", False):
        for r in est.regions:
            print_table(
                f"region {r.name}",
                [[n.name, f"{n.tokens:,.0f}", f"{n.busy:,.0f}"] for n in r.nodes],
                ["node", "tokens", "busy cycles"],
            )
    print(f"predicted makespan {est.cycles:,} cycles (strategy {est.strategy})")
    for r in prog.relayouts:
        print(
            f"{r.name}: model input {r.source} converted from {r.declared} to {r.stored} at run time "
            "(counting-sort transpose: 2 x nnz + extent cycles)"
        )
    return 0


def cmd_estimate(a) -> int:
    """``fuseflow estimate``: the cycle model's preview, no simulation."""
    prog = compile_example(a)
    explain_plan(prog, a)
    return print_estimate(prog, a)


def explain_plan(prog, a) -> None:
    """The planner's account (schedule auto) on stderr: --explain in full, else the chosen schedule."""
    if prog.plan is None:
        return
    print(prog.plan.explain() if a.explain else f"schedule auto chose: {prog.plan.schedule!r}", file=sys.stderr)


def cmd_plan(a) -> int:
    """Find a fusion schedule with the planner, print what it weighed, save the schedule."""
    from fuseflow.compiler import plan  # lazily: the CLI starts without loading what a command does not use

    model, args, formats = load_example(a.model, a)
    found = plan(
        model,
        args,
        formats,
        arch=a.arch,
        order=a.order,
        top_k=a.top_k,
        progress=(lambda m: print(m, file=sys.stderr)) if sys.stderr.isatty() else None,
        strategy=getattr(a, "strategy", "sequential"),
        max_lanes=getattr(a, "max_lanes", None),
        max_block=getattr(a, "max_block", None),
    )
    if a.json:
        print(json.dumps(_plan_json(found, a), indent=2))
    else:
        print(found.explain())
    if a.output:
        found.schedule.save(a.output)
        print(f"schedule written to {a.output} (use: --schedule {a.output})", file=sys.stderr)
    return 0


def _plan_json(found, a) -> dict:
    return {
        "model": a.model,
        "schedule": found.schedule.to_json(),
        "units": [u.label for u in found.units],
        "candidates": [
            {
                "regions": c.describe(found.units),
                "estimate_cycles": c.estimate_cycles,
                "mem_bytes": c.bytes,
                "alu_ops": c.alu_ops,
                "simulated_cycles": c.simulated_cycles,
                "status": c.status,
            }
            for c in found.candidates
        ],
        "compiles": found.compiles,
        "simulated_cycles": found.simulated_cycles,
        "wall_s": found.wall_s,
        "lanes": (
            [
                {"region": r, "lanes": lanes, "units": units, "predicted_cycles": cycles}
                for r, lanes, units, cycles in found.lanes.rows
            ]
            if found.lanes is not None
            else None
        ),
    }


def cmd_dse(a) -> int:
    """Sweep schedules x orders x lanes x blocks x arch parameters; rows, a table and a plot."""
    from rich.progress import (  # lazily: the CLI starts without loading what a command does not use
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TimeElapsedColumn,
    )

    from fuseflow.experiments.dse import (  # lazily: the CLI starts without loading what a command does not use
        flat_rows,
        load_space,
        make_executor,
        pareto_plot,
        sweep,
        write_parquet,
    )

    overrides: dict = {
        "schedule": csv_list(a.schedule),
        "order": csv_list(a.order),
        "par": csv_list(a.par),
        "block": csv_list(a.block, int),
        "arch": csv_list(a.arch),
        "strategy": csv_list(a.strategy),
        "sample": [a.sample] if a.sample else [],
    }
    for item in a.param or []:
        if "=" not in item:
            raise FuseflowError(f"--param {item!r} must be KEY=V1,V2")
        k, v = item.split("=", 1)
        overrides[k] = csv_list(v, int)
    space = load_space(a.space, overrides, prune=True if a.prune else None)
    options = option_dict(a.option)
    if a.graph:
        options["graph"] = a.graph
    if not Path(a.model).exists():
        raise FuseflowError(f"{a.model}: no such file")
    executor = make_executor(a.executor, a.address, a.jobs)
    cache = None if a.no_cache else (a.cache or os.path.join(os.path.expanduser("~"), ".cache", "fuseflow", "dse"))
    try:
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=True,
            disable=not sys.stderr.isatty(),
        ) as bar:
            task = bar.add_task(f"dse {Path(a.model).name} ({space.size} points, {executor.name})", total=None)
            result = sweep(
                a.model, options, space, executor, cache, progress=lambda d, t: bar.update(task, completed=d, total=t)
            )
    finally:
        executor.close()
    rows = result.rows
    if a.output:
        Path(a.output).write_text(json.dumps(result.to_json(), indent=2))
    if a.parquet:
        write_parquet(rows, a.parquet)
    if a.plot:
        pareto_plot(rows, a.plot, title=f"{Path(a.model).name}: {space.size} points")
    if a.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        table = [_dse_row(r) for r in flat_rows(rows)]
        headers = ["#", "schedule", "order", "par", "block", "arch", "strategy", "estimate", "cycles"]
        headers += ["bytes", "alu ops", "wall s", "status"]
        print_table(f"dse {Path(a.model).name}: {space.size} points, {result.cached} from cache", table, headers)
    failed = sum(r["status"].startswith("failed") for r in rows)
    if failed:
        print(f"fuseflow: {failed} of {len(rows)} points failed (see status)", file=sys.stderr)
    return 0


def _dse_row(r: dict) -> list:
    """One flat dse row as the table shows it."""
    params = " ".join(f"{k[5:]}={v}" for k, v in r.items() if k.startswith("arch."))
    return [
        r["point"],
        r["schedule"],
        r["order"],
        r["par"] or "-",
        r["block"] or "-",
        (r["arch"] + (" " + params if params else "")),
        r.get("strategy", "sequential"),
        r.get("est_cycles", "-"),
        r.get("cycles", "-"),
        r.get("est_mem_bytes", "-"),
        r.get("alu_ops", r.get("est_alu_ops", "-")),
        f"{r['wall_s']:.2f}" + (" (cached)" if r.get("cached") else ""),
        r["status"][:50],
    ]


def register_dse(sub) -> None:
    """The ``dse`` command's flags."""
    d = sub.add_parser("dse", help="sweep schedules x orders x lanes x blocks x arch: rows, Parquet, Pareto plot")
    add_example_file_args(d)
    d.add_argument("--space", help="TOML space description ([dse] schedule/order/par/block/arch, arch_params)")
    d.add_argument("--schedule", help="comma-separated schedules (unfused,layer,full,auto,FILE.json)")
    d.add_argument("--order", help="comma-separated orders (auto,plain,...)")
    d.add_argument("--par", help="comma-separated level:factor lane settings ('' = none), e.g. ',i:2,i:4'")
    d.add_argument("--block", help="comma-separated block sizes (0 = none)")
    d.add_argument("--arch", help="comma-separated presets or TOML files")
    d.add_argument(
        "--strategy", help="comma-separated strategies (sequential,concurrent,pipeline:4,auto,FILE.py:Class)"
    )
    d.add_argument("--param", action="append", metavar="KEY=V1,V2", help="sweep an [arch] key, e.g. fifo_depth=16,1024")
    d.add_argument("--prune", action="store_true", help="estimate every point, simulate only the non-dominated")
    add_sample_arg(d)
    d.add_argument("--executor", default="local", choices=("local", "ray"))
    d.add_argument("--address", help="Ray cluster address (with --executor ray)")
    d.add_argument("--jobs", type=int, help="worker processes (default: all cores)")
    d.add_argument("--cache", help="finished-point cache directory (default ~/.cache/fuseflow/dse)")
    d.add_argument("--no-cache", action="store_true")
    d.add_argument("-o", "--output", help="write the rows as JSON")
    d.add_argument("--parquet", help="write the rows as Parquet (pip install 'fuseflow[parquet]')")
    d.add_argument("--plot", help="write the Pareto plot (.svg or .png)")
    d.add_argument("--json", action="store_true")
    d.set_defaults(fn=cmd_dse)


def register_plan(sub) -> None:
    """The ``plan`` command's flags."""
    pl = sub.add_parser("plan", help="find a fusion schedule (schedule=auto): candidates, estimates, the choice")
    add_example_file_args(pl)
    pl.add_argument("--arch", default="comal")
    pl.add_argument("--order", help="orders of the finalists' regions: auto (default) | plain")
    pl.add_argument("--top-k", type=int, help="finalists simulated to confirm (default: 1 per 20 candidates, 1-3)")
    pl.add_argument("--strategy", default="sequential", help="the finalists run under it: " + STRATEGY_HELP)
    pl.add_argument("--max-lanes", type=int, help="on a finite fabric, the most lanes a region gets (default 16)")
    pl.add_argument("--json", action="store_true")
    pl.add_argument("-o", "--output", help="save the chosen schedule (.json or .py) for --schedule FILE")
    pl.set_defaults(fn=cmd_plan)


def register_estimate(sub) -> None:
    """The ``estimate`` command's flags."""
    e = sub.add_parser("estimate", help="predict cycles, tokens, ALU ops and bytes per region without simulating")
    add_model_args(e)
    e.add_argument("--nodes", action="store_true", help="also predicted tokens and busy cycles per node")
    e.set_defaults(fn=cmd_estimate)
