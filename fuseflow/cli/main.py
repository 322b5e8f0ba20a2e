"""The ``fuseflow`` command: compile, simulate and run sparse models."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

from fuseflow.errors import FuseflowError


def _load_module(path: str):
    p = Path(path)
    if not p.exists():
        raise FuseflowError(f"{path}: no such file")
    sys.path.insert(0, str(p.parent.resolve()))
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[p.stem] = mod
    spec.loader.exec_module(mod)
    if not hasattr(mod, "build"):
        raise FuseflowError(f"{path}: defines no build(**options) -> (model, example_args, formats)")
    return mod


def _options(pairs: list[str] | None) -> dict:
    out = {}
    for item in pairs or []:
        if "=" not in item:
            raise FuseflowError(f"option {item!r} must be NAME=VALUE")
        k, v = item.split("=", 1)
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def _build(path: str, a) -> tuple:
    mod = _load_module(path)
    opts = _options(getattr(a, "option", None))
    if getattr(a, "graph", None):
        opts["graph"] = a.graph
    try:
        return mod, mod.build(**opts)
    except TypeError as e:
        raise FuseflowError(f"{path}: build() rejected the options: {e}") from None


def _load_example(path: str, a=None):
    return _build(path, a)[1]


def _table(title: str, rows: list[list], headers: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    for i, h in enumerate(headers):
        t.add_column(h, justify="left" if i == 0 else "right", no_wrap=True)
    for r in rows:
        t.add_row(*[str(x) for x in r])
    Console(width=200).print(t)


def _write_json(result: dict, a) -> bool:
    """Write `result` to `-o FILE` if given; print it and return True under `--json`."""
    if a.output:
        Path(a.output).write_text(json.dumps(result, indent=2))
    if a.json:
        print(json.dumps(result, indent=2))
    return bool(a.json)


def _print_estimate(prog, a) -> int:
    """The cycle model's preview of a compiled program (no simulation)."""
    est = prog.estimate(arch=a.arch)
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
    rows.append(["total", f"{est.cycles:,}", "", f"{est.alu_ops:,}", f"{est.mem_bytes:,}", "", ""])
    _table(
        f"{Path(a.model).name}: estimate, schedule {a.schedule}, arch {est.arch.name} (not simulated)",
        rows,
        ["region", "cycles", "tokens", "alu ops", "memory bytes", "recompute", "bottleneck"],
    )
    if getattr(a, "nodes", False):
        for r in est.regions:
            _table(
                f"region {r.name}",
                [[n.name, f"{n.tokens:,.0f}", f"{n.busy:,.0f}"] for n in r.nodes],
                ["node", "tokens", "busy cycles"],
            )
    for r in prog.relayouts:
        print(
            f"{r.name}: model input {r.source} converted from {r.declared} to {r.stored} at run time "
            "(counting-sort transpose: 2 x nnz + extent cycles)"
        )
    return 0


def cmd_estimate(a) -> int:
    import fuseflow

    model, args, formats = _load_example(a.model, a)
    prog = fuseflow.compile(model, args, formats=formats, schedule=a.schedule, order=a.order, passes=a.pipeline)
    _explain(prog, a)
    return _print_estimate(prog, a)


def _explain(prog, a) -> None:
    """The planner's account (schedule auto) on stderr: --explain in full, else the chosen schedule."""
    if prog.plan is None:
        return
    print(prog.plan.explain() if a.explain else f"schedule auto chose: {prog.plan.schedule!r}", file=sys.stderr)


def cmd_plan(a) -> int:
    """Find a fusion schedule with the planner, print what it weighed, save the schedule."""
    from fuseflow.planner import plan

    model, args, formats = _load_example(a.model, a)
    found = plan(
        model,
        args,
        formats,
        arch=a.arch,
        order=a.order,
        top_k=a.top_k,
        progress=(lambda m: print(m, file=sys.stderr)) if sys.stderr.isatty() else None,
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
    }


def _csv(text: str | None, kind=str) -> list:
    if text is None:
        return []
    out = []
    for item in text.split(","):
        item = item.strip()
        try:
            out.append(kind(item) if item or kind is str else kind(0))
        except ValueError:
            raise FuseflowError(f"expected a comma-separated list of {kind.__name__}s, got {text!r}") from None
    return out


def cmd_dse(a) -> int:
    """Sweep schedules x orders x lanes x blocks x arch parameters; rows, a table and a plot."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from fuseflow.dse import flat_rows, load_space, make_executor, pareto_plot, sweep, write_parquet

    overrides: dict = {
        "schedule": _csv(a.schedule),
        "order": _csv(a.order),
        "par": _csv(a.par),
        "block": _csv(a.block, int),
        "arch": _csv(a.arch),
    }
    for item in a.param or []:
        if "=" not in item:
            raise FuseflowError(f"--param {item!r} must be KEY=V1,V2")
        k, v = item.split("=", 1)
        overrides[k] = _csv(v, int)
    space = load_space(a.space, overrides, prune=True if a.prune else None)
    options = _options(a.option)
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
        table = []
        for r in flat_rows(rows):
            params = " ".join(f"{k[5:]}={v}" for k, v in r.items() if k.startswith("arch."))
            table.append(
                [
                    r["point"],
                    r["schedule"],
                    r["order"],
                    r["par"] or "-",
                    r["block"] or "-",
                    (r["arch"] + (" " + params if params else "")),
                    r.get("est_cycles", "-"),
                    r.get("cycles", "-"),
                    r.get("est_mem_bytes", "-"),
                    r.get("alu_ops", r.get("est_alu_ops", "-")),
                    f"{r['wall_s']:.2f}" + (" (cached)" if r.get("cached") else ""),
                    r["status"][:50],
                ]
            )
        headers = ["#", "schedule", "order", "par", "block", "arch", "estimate", "cycles"]
        headers += ["bytes", "alu ops", "wall s", "status"]
        _table(f"dse {Path(a.model).name}: {space.size} points, {result.cached} from cache", table, headers)
    failed = sum(r["status"].startswith("failed") for r in rows)
    if failed:
        print(f"fuseflow: {failed} of {len(rows)} points failed (see status)", file=sys.stderr)
    return 0


def cmd_run(a) -> int:
    import fuseflow

    model, args, formats = _load_example(a.model, a)
    prog = fuseflow.compile(model, args, formats=formats, schedule=a.schedule, order=a.order, passes=a.pipeline)
    _explain(prog, a)
    if a.estimate:
        return _print_estimate(prog, a)
    res = prog.simulate(
        arch=a.arch,
        spans=bool(a.save),
        progress=sys.stderr.isatty() or None,
        engine=a.engine,
        memo=a.memo,
        jobs=a.jobs,
    )
    err = res.check()
    if a.save:
        Path(a.save).write_text(json.dumps(res.to_json(detail=True)))
    if a.json:
        print(json.dumps(res.to_json(), indent=2))
        return 0
    err_of = dict(zip(prog.output_names, res.output_errors))
    rows = []
    for r in res.regions:
        errs = [err_of[t] for t in r.writes if t in err_of]
        rows.append(
            [
                r.name + (" (memo)" if r.memoised else ""),
                r.cycles,
                r.totals()["tokens_out"],
                r.totals()["alu_ops"],
                f"{max(errs):.3g}" if errs else "-",
            ]
        )
    rows.append(
        [
            "total",
            res.cycles,
            sum(r.totals()["tokens_out"] for r in res.regions),
            sum(r.totals()["alu_ops"] for r in res.regions),
            f"{err:.3g}",
        ]
    )
    _table(
        f"{Path(a.model).name}: schedule {a.schedule}, arch {res.arch.name}",
        rows,
        ["region", "cycles", "tokens", "alu ops", "max abs error"],
    )
    print(f"outputs match eager PyTorch (rtol = atol = 1e-5 x longest dimension): max abs error {err:.3g}")
    return 0


def cmd_study(a) -> int:
    """Cycles, FLOPs and memory traffic per fusion schedule, with speedup over unfused."""
    import time

    import fuseflow
    from rich.progress import Progress

    mod, (model, args, formats) = _build(a.model, a)
    base = fuseflow.compile(model, args, formats=formats, schedule="unfused", order=a.order)
    schedules: list = [("unfused", "unfused"), ("layer", "layer"), ("full", "full")]
    if hasattr(mod, "schedules"):
        schedules += list(mod.schedules(base.op_infos).items())
    if a.schedules:
        keep = a.schedules.split(",")
        schedules = [s for s in schedules if s[0] in keep]
    rows = []
    with Progress(transient=True) as progress:
        task = progress.add_task("schedules", total=len(schedules))
        for name, sched in schedules:
            progress.update(task, description=f"{name}: compile")
            t0 = time.perf_counter()
            try:
                prog = (
                    base
                    if name == "unfused"
                    else fuseflow.compile(
                        model, args, formats=formats, schedule=sched, node_budget=a.node_budget, order=a.order
                    )
                )
                t1 = time.perf_counter()
                progress.update(task, description=f"{name}: simulate")
                res = prog.simulate(
                    arch=a.arch,
                    engine=a.engine,
                    memo=a.memo,
                    jobs=a.jobs,
                    progress=lambda region, cycle, name=name: progress.update(
                        task, description=f"{name}: simulate {region} ({cycle:,} cycles)"
                    ),
                )
                t2 = time.perf_counter()
                err = res.check()
            except fuseflow.FuseflowError as e:  # one schedule failing does not lose the others
                first = str(e).splitlines()[0]
                rows.append({"schedule": name, "error": first[:300], "compile_s": None, "simulate_s": None})
                progress.advance(task)
                continue
            tot = [r.totals() for r in res.regions]
            rows.append(
                {
                    "schedule": name,
                    "regions": len(prog.graphs),
                    "cycles": res.cycles,
                    "alu_ops": sum(t["alu_ops"] for t in tot),
                    "reductions": sum(t["reductions"] for t in tot),
                    "mem_read_bytes": sum(t["mem_read_bytes"] for t in tot),
                    "mem_write_bytes": sum(t["mem_write_bytes"] for t in tot),
                    "max_abs_error": err,
                    "compile_s": round(t1 - t0, 2),
                    "simulate_s": round(t2 - t1, 2),
                }
            )
            progress.advance(task)
    base_cycles = rows[0].get("cycles") if rows and rows[0]["schedule"] == "unfused" else None
    for r in rows:
        r["speedup_vs_unfused"] = round(base_cycles / r["cycles"], 3) if base_cycles and "cycles" in r else None
    result = {
        "model": a.model,
        "options": _options(a.option) | ({"graph": a.graph} if a.graph else {}),
        "arch": a.arch,
        "schedules": rows,
    }
    if _write_json(result, a):
        return 0
    _table(
        f"fusion study: {Path(a.model).name} (arch {a.arch})",
        [
            [
                r["schedule"],
                r["regions"],
                r["cycles"],
                r["speedup_vs_unfused"],
                r["alu_ops"],
                r["mem_read_bytes"] + r["mem_write_bytes"],
                f"{r['max_abs_error']:.2g}",
                r["compile_s"],
                r["simulate_s"],
            ]
            if "error" not in r
            else [r["schedule"], "-", "failed", "-", "-", "-", "-", "-", r["error"][:60]]
            for r in rows
        ],
        [
            "schedule",
            "regions",
            "cycles",
            "speedup",
            "FLOPs (alu ops)",
            "memory bytes",
            "max abs err",
            "compile s",
            "simulate s",
        ],
    )
    return 0


def cmd_order_sweep(a) -> int:
    """Simulate every enumerated dataflow order of one region: cycles (with the conversion of every
    model input the order re-lays out), the cycle model's prediction, and auto's pick."""
    import fuseflow
    from rich.progress import Progress

    model, args, formats = _load_example(a.model, a)
    first = fuseflow.compile(model, args, formats=formats, schedule=a.schedule, order="auto")
    regions = list(first.order_candidates)
    region = a.region or (regions[0] if len(regions) == 1 else None)
    if region is None or region not in first.order_candidates:
        raise FuseflowError(
            f"choose a region with --region: {', '.join(regions)}"
            if region is None
            else f"no region {region!r}; regions: {', '.join(regions)}"
        )
    cands = [c for c in first.order_candidates[region]][: a.cap]
    auto = first.orders[region]
    rows = []
    with Progress(transient=True) as progress:
        task = progress.add_task(f"orders of {region}", total=len(cands))
        for c in cands:
            row = {
                "index": c.index,
                "order": c.name,
                "relayouts": list(c.relayouts),
                "estimate": round(c.estimate.cost),
                "auto": c.name == auto,
            }
            try:
                prog = first.reorder({region: c.name})
                res = prog.simulate(arch=a.arch, engine=a.engine)
                row["max_abs_error"] = res.check()
                row["cycles"] = res.cycles
                conversions = sum(r.cycles for r in res.regions if r.engine == "model")
                row["relayout_cycles"] = conversions
                row["region_cycles"] = next(r.cycles for r in res.regions if r.name == region) + conversions
                est = prog.estimate(arch=a.arch)
                row["predicted"] = round(
                    next(r.cycles for r in est.regions if r.name == region)
                    + sum(r.cycles for r in est.regions if r.bottleneck == "relayout")
                )
            except fuseflow.FuseflowError as e:  # one order failing does not lose the others
                row["error"] = str(e).splitlines()[0][:300]
            rows.append(row)
            progress.advance(task)
    done = [r for r in rows if "cycles" in r]
    best = min((r["region_cycles"] for r in done), default=None)
    for r in done:
        r["vs_best"] = round(r["region_cycles"] / best, 3) if best else None
    result = {"model": a.model, "schedule": a.schedule, "region": region, "arch": a.arch, "auto": auto, "orders": rows}
    if _write_json(result, a):
        return 0
    _table(
        f"order sweep: {Path(a.model).name}, region {region} (arch {a.arch}; * = order=auto; cycles include "
        "re-laying out model inputs)",
        [
            [
                r["index"],
                r["order"] + (" *" if r["auto"] else ""),
                ",".join(r["relayouts"]) or "-",
                r["estimate"],
                r.get("predicted", "-"),
                r.get("region_cycles", "failed"),
                r.get("vs_best", r.get("error", "")[:60]),
            ]
            for r in rows
        ],
        ["#", "order", "re-laid out", "static estimate", "predicted cycles", "cycles", "x best"],
    )
    return 0


def cmd_report(a) -> int:
    from rich.console import Console

    from fuseflow.report.render import dot, perfetto, table

    p = Path(a.result)
    if not p.exists():
        raise FuseflowError(f"{a.result}: no such file")
    try:
        result = json.loads(p.read_text())
        _ = result["regions"], result["total_cycles"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise FuseflowError(f"{a.result}: not a fuseflow result (write one with `fuseflow run --save`)") from None
    console = Console()
    for t in table(result, nodes=a.nodes):
        console.print(t)
    if a.trace:
        Path(a.trace).write_text(json.dumps(perfetto(result)))
        print(f"wrote {a.trace} (open in ui.perfetto.dev or chrome://tracing)")
    if a.dot:
        Path(a.dot).write_text(dot(result))
        print(f"wrote {a.dot} (render with: dot -Tsvg {a.dot} -o graph.svg)")
    return 0


def cmd_compile(a) -> int:
    import fuseflow

    model, args, formats = _load_example(a.model, a)
    prog = fuseflow.compile(model, args, formats=formats, schedule=a.schedule, order=a.order, passes=a.pipeline)
    out = Path(a.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(a.model).stem
    (out / f"{stem}.linalg.mlir").write_text(prog.mlir("linalg"))
    (out / f"{stem}.sam.mlir").write_text(prog.mlir("sam"))
    print(prog.ops())
    print(prog.regions())
    print(f"wrote {out / (stem + '.linalg.mlir')} and {out / (stem + '.sam.mlir')}")
    return 0


def cmd_simulate(a) -> int:
    import numpy as np
    import scipy.sparse as sp

    from fuseflow.dialects.sam import new_context
    from fuseflow.mlir import MLIRError, ir
    from fuseflow.progress import progress_reporter
    from fuseflow.sim.arch import Arch
    from fuseflow.sim.graph import parse_graphs, run_graph

    path = Path(a.file)
    if not path.exists():
        raise FuseflowError(f"{a.file}: no such file")
    with new_context():
        try:
            module = ir.Module.parse(path.read_text())
        except MLIRError as e:
            raise _first_diag(str(e), a.file) from None
        graphs, outs = parse_graphs(module)
    env = {}
    if a.data:
        d = Path(a.data)
        if not d.is_dir():
            raise FuseflowError(f"{a.data}: not a directory")
        for f in d.iterdir():
            if f.suffix == ".npy":
                env[f.stem] = np.load(f)
            elif f.suffix == ".npz":
                env[f.stem] = sp.load_npz(f).toarray()
    arch = Arch.resolve(a.arch)
    rows, result = [], {"regions": [], "outputs": {}}
    with progress_reporter(sys.stderr.isatty() or None) as report:
        for g in graphs:
            cb = (lambda cycle, name=g.name: report(name, cycle)) if report else None
            run = run_graph(g, env, arch, progress=cb, engine=a.engine)
            env.update(run.outputs)
            rows.append([g.name, run.cycles])
            result["regions"].append({"name": g.name, "cycles": run.cycles, "engine": run.engine})
    result["total_cycles"] = sum(r["cycles"] for r in result["regions"])
    if a.output_dir:
        od = Path(a.output_dir)
        od.mkdir(parents=True, exist_ok=True)
        for n in outs:
            np.save(od / f"{n}.npy", env[n])
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        _table(str(path.name), rows + [["total", result["total_cycles"]]], ["region", "cycles"])
    return 0


def _first_diag(text: str, file: str) -> FuseflowError:
    """The first MLIR diagnostic as a located error (``file:line:col: error: message``)."""
    import re

    m = re.search(r'"-":(\d+):(\d+): (?:error: )?(.*)', text)
    if m:
        return FuseflowError(m.group(3).strip(), f"{file}:{m.group(1)}:{m.group(2)}")
    return FuseflowError(text.splitlines()[0] if text else "malformed input")


def _engine_arg(p: argparse.ArgumentParser) -> None:
    from fuseflow.sim.graph import ENGINES

    p.add_argument(
        "--engine",
        default="auto",
        choices=ENGINES,
        help="simulation engine (same results): auto picks window when FIFOs are deep and memory is off",
    )


def _shortcut_args(p: argparse.ArgumentParser) -> None:
    """Simulation shortcuts that never change a cycle (sim/memo.py, Program.simulate)."""
    p.add_argument(
        "--memo",
        nargs="?",
        const=True,
        default=None,
        metavar="DIR",
        help="simulate structurally identical regions once (values from their index notation); "
        "DIR keeps the memo on disk for later runs",
    )
    p.add_argument("--jobs", type=int, default=1, help="regions simulated at once in worker processes")


def _pass_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--order", help="dataflow order of every region: auto (default, by the cycle model) | plain | K | i,k,j"
    )
    p.add_argument("--pipeline", help="fuseflow passes after partitioning, e.g. 'fuseflow-order{order=auto}'")


def _example_file_args(p: argparse.ArgumentParser) -> None:
    """The model file and what its build() takes: every command that builds an example."""
    p.add_argument("model", help="Python file defining build(**options) -> (model, example_args, formats)")
    p.add_argument("--graph", help="graph file for GNN examples (.npz, .mtx, edge list)")
    p.add_argument("--option", "-O", action="append", metavar="NAME=VALUE", help="pass an option to build()")


def _model_args(p: argparse.ArgumentParser) -> None:
    """What every command that compiles one model file takes."""
    _example_file_args(p)
    p.add_argument("--schedule", default="unfused", help="unfused | layer | full | op | auto | FILE.json/.py (rules)")
    p.add_argument("--arch", default="comal", help="preset (comal, sam, rda) or TOML file")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--explain", action="store_true", help="with --schedule auto: what the planner weighed and why")
    _pass_args(p)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fuseflow", description=__doc__)
    p.add_argument("--verbose", action="store_true", help="show torch-mlir's own diagnostics on stderr")
    sub = p.add_subparsers(dest="cmd", required=True)
    ops = sub.add_parser("ops", help="list the supported PyTorch ops and sparse formats")
    ops.add_argument("--markdown", action="store_true", help="print docs/ops.md")
    ops.set_defaults(fn=cmd_ops)
    r = sub.add_parser("run", help="compile a model file, simulate it and check it against PyTorch")
    _model_args(r)
    r.add_argument("--save", metavar="FILE", help="write the detailed result (per-node counters, spans) for `report`")
    r.add_argument("--estimate", action="store_true", help="print the cycle model's preview instead of simulating")
    _engine_arg(r)
    _shortcut_args(r)
    r.set_defaults(fn=cmd_run)
    d = sub.add_parser("dse", help="sweep schedules x orders x lanes x blocks x arch: rows, Parquet, Pareto plot")
    _example_file_args(d)
    d.add_argument("--space", help="TOML space description ([dse] schedule/order/par/block/arch, arch_params)")
    d.add_argument("--schedule", help="comma-separated schedules (unfused,layer,full,auto,FILE.json)")
    d.add_argument("--order", help="comma-separated orders (auto,plain,...)")
    d.add_argument("--par", help="comma-separated level:factor lane settings ('' = none), e.g. ',i:2,i:4'")
    d.add_argument("--block", help="comma-separated block sizes (0 = none)")
    d.add_argument("--arch", help="comma-separated presets or TOML files")
    d.add_argument("--param", action="append", metavar="KEY=V1,V2", help="sweep an [arch] key, e.g. fifo_depth=16,1024")
    d.add_argument("--prune", action="store_true", help="estimate every point, simulate only the non-dominated")
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
    pl = sub.add_parser("plan", help="find a fusion schedule (schedule=auto): candidates, estimates, the choice")
    _example_file_args(pl)
    pl.add_argument("--arch", default="comal")
    pl.add_argument("--order", help="orders of the finalists' regions: auto (default) | plain")
    pl.add_argument("--top-k", type=int, help="finalists simulated to confirm (default: 1 per 20 candidates, 1-3)")
    pl.add_argument("--json", action="store_true")
    pl.add_argument("-o", "--output", help="save the chosen schedule (.json or .py) for --schedule FILE")
    pl.set_defaults(fn=cmd_plan)
    e = sub.add_parser("estimate", help="predict cycles, tokens, ALU ops and bytes per region without simulating")
    _model_args(e)
    e.add_argument("--nodes", action="store_true", help="also predicted tokens and busy cycles per node")
    e.set_defaults(fn=cmd_estimate)
    st = sub.add_parser("study", help="compare fusion schedules: cycles, speedup, FLOPs, memory traffic")
    _example_file_args(st)
    st.add_argument("--schedules", help="comma-separated subset (unfused,layer,full,...)")
    st.add_argument("--arch", default="comal")
    st.add_argument("--node-budget", type=int, default=100_000)
    st.add_argument("--order", help="dataflow order of every region: auto (default) | plain (studies before session 6)")
    st.add_argument("--json", action="store_true")
    st.add_argument("-o", "--output", help="also write the JSON here")
    _engine_arg(st)
    _shortcut_args(st)
    st.set_defaults(fn=cmd_study)
    o = sub.add_parser("order-sweep", help="simulate every dataflow order of a region; cycles per order")
    _example_file_args(o)
    o.add_argument("--schedule", default="full", help="fusion schedule (default full)")
    o.add_argument("--region", help="region to sweep (needed when the schedule has several)")
    o.add_argument("--cap", type=int, default=64, help="at most this many orders")
    o.add_argument("--arch", default="comal")
    o.add_argument("--json", action="store_true")
    o.add_argument("-o", "--output", help="also write the JSON here")
    _engine_arg(o)
    o.set_defaults(fn=cmd_order_sweep)

    rp = sub.add_parser("report", help="tables, a Perfetto trace and a DOT graph from a saved result")
    rp.add_argument("result", help="JSON written by `fuseflow run --save`")
    rp.add_argument("--nodes", action="store_true", help="also print per-node counters")
    rp.add_argument("--trace", metavar="FILE", help="write Chrome/Perfetto trace JSON")
    rp.add_argument("--dot", metavar="FILE", help="write the annotated dataflow graph as DOT")
    rp.set_defaults(fn=cmd_report)
    c = sub.add_parser("compile", help="write the linalg and sam modules of a model file")
    _example_file_args(c)
    c.add_argument("--schedule", default="unfused")
    _pass_args(c)
    c.add_argument("-o", "--output-dir", default=".")
    c.set_defaults(fn=cmd_compile)
    s = sub.add_parser("simulate", help="simulate a sam .mlir file on data from a directory")
    s.add_argument("file")
    s.add_argument("--data", help="directory of NAME.npy (dense) or NAME.npz (scipy sparse) inputs")
    s.add_argument("--arch", default="comal")
    s.add_argument("--json", action="store_true")
    s.add_argument("-o", "--output-dir", help="write outputs as NAME.npy here")
    _engine_arg(s)
    s.set_defaults(fn=cmd_simulate)
    return p


def cmd_ops(a) -> int:
    """The supported-op table and the formats (docs/ops.md is `--markdown`)."""
    from fuseflow.formats import FORMAT_DOCS
    from fuseflow.frontend.ops import SUPPORTED, markdown

    if a.markdown:
        print(markdown(), end="")
        return 0
    _table(
        "supported ops (as exported, after decomposition)",
        [[s.name, s.kind, s.example] for s in SUPPORTED],
        ["op", "kind", "example"],
    )
    _table("formats", [list(f) for f in FORMAT_DOCS], ["format", "meaning"])
    return 0


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TMPDIR", os.path.join(os.getcwd(), "build", "tmp"))
    os.makedirs(os.environ["TMPDIR"], exist_ok=True)
    a = parser().parse_args(argv)
    if a.verbose:
        os.environ["FUSEFLOW_VERBOSE"] = "1"  # torch-mlir's own diagnostics go to stderr
    import warnings

    def one_line(message, category, filename, lineno, file=None, line=None):
        print(f"fuseflow: warning: {message}", file=sys.stderr)

    warnings.showwarning = one_line
    # torch's own notices about its sparse support and dependencies' deprecations are not the user's business
    warnings.filterwarnings("ignore", message=r"Sparse (CSR|BSR|BSC) tensor support is in beta state")
    warnings.filterwarnings("ignore", message=r"Sparse invariant checks are implicitly disabled")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    try:
        return a.fn(a)
    except FuseflowError as e:
        print(f"fuseflow: {e}" if not e.location else str(e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
