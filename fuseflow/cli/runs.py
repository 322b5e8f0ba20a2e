"""``fuseflow run``, ``study`` and ``order-sweep``: compile, simulate and check model files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fuseflow.cli.common import (
    STRATEGY_HELP,
    add_engine_arg,
    add_example_file_args,
    add_model_args,
    add_pieces_args,
    add_sample_arg,
    add_shortcut_args,
    build_model,
    compile_example,
    load_example,
    option_dict,
    print_table,
    write_json,
)
from fuseflow.cli.planning import explain_plan, print_estimate
from fuseflow.errors import FuseflowError
from fuseflow.fabric.resources import lanes_of


def cmd_run(a) -> int:
    """``fuseflow run``: compile, simulate, check against PyTorch and report."""
    if a.checkpoint:
        remember_command(a.checkpoint, a.argv)
    prog = compile_example(a)
    explain_plan(prog, a)
    if a.estimate:
        return print_estimate(prog, a)
    res = prog.simulate(
        arch=a.arch,
        spans=bool(a.save) and not a.sample and not a.pieces,  # sampled or in pieces: no whole run to trace
        progress=sys.stderr.isatty() or None,
        engine=a.engine,
        memo=a.memo,
        jobs=a.jobs,
        strategy=a.strategy,
        sample=a.sample,
        pieces=a.pieces,
        checkpoint=a.checkpoint,
        every=a.every,
    )
    err = res.check()
    if a.save:
        Path(a.save).write_text(json.dumps(res.to_json(detail=True)))
    if a.timeline:
        from fuseflow.report.gantt import draw  # lazily: the CLI starts without loading what a command does not use

        draw(
            res.timeline,
            a.timeline,
            f"{Path(a.model).name}: {a.schedule}, {res.strategy}, {res.arch.name}",
            res.arch.fabric,
        )
    if a.json:
        print(json.dumps(res.to_json(), indent=2))
        return 0
    rows = _run_rows(prog, res, err)
    print_table(
        f"{Path(a.model).name}: schedule {a.schedule}, arch {res.arch.name}, strategy {res.strategy}",
        rows,
        ["region", "lanes", "cycles", "start", "end", "tokens", "alu ops", "max abs error"],
    )
    print(f"makespan {res.cycles:,} cycles ({res.serial_cycles:,} cycles of regions{_fabric_note(res)})")
    if res.sampled is not None and res.interval is not None:
        s = res.sampled
        print(
            f"sampled ({s.target}): makespan in [{res.interval[0]:,}, {res.interval[1]:,}]; {s.units:,} of "
            f"{s.total:,} units simulated ({s.estimator}); {len(s.whole)} region(s) simulated whole"
        )
    if any(r.pieces is not None for r in res.regions):
        print(_pieces_line(res))
    if res.split is not None:
        print(
            f"split: {res.split.k} micro-batches by {res.split.kind}, imbalance {res.split.imbalance:.2f} "
            "(max/mean work); a region marked xK ran once per micro-batch, start/end span them all"
        )
    print(f"outputs match eager PyTorch (rtol = atol = 1e-5 x longest dimension): max abs error {err:.3g}")
    if a.timeline:
        print(f"wrote {a.timeline}")
    return 0


def _lanes_cell(graph) -> str | int:
    """The run table's lanes column: the region's lanes, and ``b16`` where it runs over 16 x 16 blocks."""
    lanes = lanes_of(graph)
    return f"{lanes} b{graph.block}" if graph.block else lanes


def _run_rows(prog, res, err: float) -> list[list]:
    """The run table's rows: one per region (memoised, micro-batched, sampled ones marked), then
    the total."""
    err_of = dict(zip(prog.output_names, res.output_errors))
    rows = []
    placed = _region_spans(res.timeline)
    lanes = {g.name: _lanes_cell(g) for g in prog.graphs}
    for r in res.regions:
        errs = [err_of[t] for t in r.writes if t in err_of]
        start, end, batches = placed.get(r.name, (0, 0, 0))
        rows.append(
            [
                r.name + (" (memo)" if r.memoised else "") + (f" x{batches}" if batches > 1 else "") + _sampled(r),
                lanes.get(r.name, "-"),
                r.cycles,
                start,
                end,
                r.totals()["tokens_out"],
                r.totals()["alu_ops"],
                f"{max(errs):.3g}" if errs else "-",
            ]
        )
    rows.append(
        [
            "total",
            "",
            res.serial_cycles,
            0,
            res.cycles,
            sum(r.totals()["tokens_out"] for r in res.regions),
            sum(r.totals()["alu_ops"] for r in res.regions),
            f"{err:.3g}",
        ]
    )
    return rows


COMMAND_FILE = "command.json"
"""In a checkpoint directory: the command that writes it, for `fuseflow resume`."""


def remember_command(directory: str, argv: list[str]) -> None:
    """Keep the running command's arguments in the checkpoint directory (`fuseflow resume` runs
    them again). `argv` is what the command parsed, not the process's own: under `fuseflow
    resume` that is the resumed command, so a run resumed twice resumes the same command."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    (Path(directory) / COMMAND_FILE).write_text(json.dumps({"argv": list(argv), "cwd": str(Path.cwd())}))


def _pieces_line(res) -> str:
    """What a run in pieces did: the pieces, the tokens taped across cuts and their bytes."""
    cut = [r.pieces for r in res.regions if r.pieces is not None]
    tokens, size, resumed = sum(c.tokens for c in cut), sum(c.bytes for c in cut), sum(c.resumed for c in cut)
    continued = [cycle for c in cut for cycle in c.continued]
    line = f"in pieces: {sum(c.pieces for c in cut)} pieces over {len(cut)} region(s), exact"
    if tokens:
        line += f"; {tokens:,} tokens crossed a cut in {size:,} bytes ({size / tokens:.2f} bytes a token)"
    if resumed:
        line += f"; {resumed} piece(s) resumed from the checkpoint"
    if continued:
        line += (
            f"; {len(continued)} piece(s) continued from a saved state (cycle {', '.join(f'{c:,}' for c in continued)})"
        )
    return line


def _sampled(r) -> str:
    """`` (sampled 12/400, ±1.8%)`` for a sampled region's row of the run table."""
    s = r.sampled
    if s is None:
        return ""
    return f" (sampled {s.units}/{s.total}, ±{s.half_width / max(r.cycles, 1):.1%})"


def _region_spans(timeline) -> dict[str, tuple[int, int, int]]:
    """Each region's first start, last end and number of runs (micro-batches) on the timeline."""
    out: dict[str, tuple[int, int, int]] = {}
    for s in timeline:
        a, b, n = out.get(s.region, (s.start, s.end, 0))
        out[s.region] = (min(a, s.start), max(b, s.end), n + 1)
    return out


def _fabric_note(res) -> str:
    fabric = res.arch.fabric
    if fabric is None:
        return "; unbounded fabric"
    frac = res.utilization.fraction or {}
    return (
        f"; fabric {fabric.compute} compute / {fabric.memory} memory units, "
        f"{fabric.reconfig_cycles} cycles per configuration, busy {frac.get('compute', 0):.0%} / "
        f"{frac.get('memory', 0):.0%}"
    )


def _requested(known: list, spec: str) -> list:
    """The schedules `--schedules` names, in its order: built-in names (``op`` included), the
    model's own (`schedules()`) and schedule files; an unknown name is an error listing the valid ones."""
    from fuseflow.schedule.rules import BUILTIN  # lazily: the CLI starts without loading what a command does not use

    by_name = dict(known)
    out = []
    for name in (s.strip() for s in spec.split(",") if s.strip()):
        if name in by_name or name in BUILTIN or name == "auto":
            out.append((name, by_name.get(name, name)))
        elif name.endswith((".json", ".py")):
            out.append((Path(name).stem, name))
        else:
            valid = list(dict.fromkeys([*by_name, *BUILTIN, "auto"]))
            raise FuseflowError(
                f"unknown schedule {name!r} in --schedules; valid: {', '.join(valid)}, or FILE.json/.py"
            )
    return out


def cmd_study(a) -> int:
    """Cycles, FLOPs and memory traffic per fusion schedule, with speedup over unfused."""
    from rich.progress import Progress  # lazily: the CLI starts without loading what a command does not use

    import fuseflow  # lazily: the CLI starts without loading what a command does not use
    from fuseflow.experiments.study import study  # lazily: the CLI starts without loading what a command does not use

    mod, (model, args, formats) = build_model(a.model, a)
    base = fuseflow.compile(model, args, formats=formats, schedule="unfused", order=a.order, arch=a.arch)
    schedules: list = [("unfused", "unfused"), ("layer", "layer"), ("full", "full")]
    if hasattr(mod, "schedules"):
        schedules += list(mod.schedules(base.op_infos).items())
    if a.schedules:
        schedules = _requested(schedules, a.schedules)
    with Progress(transient=True) as progress:
        task = progress.add_task("schedules", total=len(schedules))
        rows = study(
            (model, args, formats),
            schedules,
            base=base,
            order=a.order,
            node_budget=a.node_budget,
            arch=a.arch,
            strategy=a.strategy,
            engine=a.engine,
            memo=a.memo,
            jobs=a.jobs,
            sample=a.sample,
            stage=lambda name, what: progress.update(task, description=f"{name}: {what}"),
            progress=lambda name, region, cycle: progress.update(
                task, description=f"{name}: simulate {region} ({cycle:,} cycles)"
            ),
            done=lambda _name: progress.advance(task),
        )
    result = {
        "model": a.model,
        "options": option_dict(a.option) | ({"graph": a.graph} if a.graph else {}),
        "arch": a.arch,
        "strategy": a.strategy,
        "schedules": rows,
    }
    if not write_json(result, a):
        _print_study(a, rows)
    return 0


def _print_study(a, rows: list[dict]) -> None:
    print_table(
        f"fusion study: {Path(a.model).name} (arch {a.arch}, strategy {a.strategy}; cycles: the makespan)",
        [
            [
                r["schedule"],
                r["regions"],
                r["lanes"],
                r["region_cycles"],
                r["estimated_cycles"],
                _cycles(r),
                r["speedup_vs_unfused"],
                r["alu_ops"],
                r["mem_read_bytes"] + r["mem_write_bytes"],
                f"{r['max_abs_error']:.2g}",
                _busy(r.get("busy")),
                r["compile_s"],
                r["simulate_s"],
            ]
            if "error" not in r
            else [r["schedule"], "-", "-", "-", "-", "failed", "-", "-", "-", "-", "-", "-", r["error"][:60]]
            for r in rows
        ],
        [
            "schedule",
            "regions",
            "lanes",
            "region cycles",
            "estimated",
            "cycles",
            "speedup",
            "FLOPs (alu ops)",
            "memory bytes",
            "max abs err",
            "busy c/m",
            "compile s",
            "simulate s",
        ],
    )


def _cycles(row: dict) -> str | int:
    """A study row's cycles; a sampled figure reads ``~N ±h%`` (exact when every region ran whole)."""
    if "interval" not in row or not row.get("sampled", {}).get("units"):
        return row["cycles"]
    lo, hi = row["interval"]
    return f"~{row['cycles']} ±{(hi - lo) / 2 / max(row['cycles'], 1):.1%}"


def _busy(busy: dict | None) -> str:
    """Busy compute / memory units over the fabric's capacity (``-`` on an unbounded fabric)."""
    if not busy:
        return "-"
    return f"{busy.get('compute', 0):.0%} / {busy.get('memory', 0):.0%}"


def cmd_order_sweep(a) -> int:
    """Simulate every enumerated dataflow order of one region: cycles (with the conversion of every
    model input the order re-lays out), the cycle model's prediction, and auto's pick."""
    from rich.progress import Progress  # lazily: the CLI starts without loading what a command does not use

    from fuseflow.experiments.order_sweep import (  # lazily: the CLI starts without loading what a command does not use
        order_sweep,  # lazily: the CLI starts without loading what a command does not use
    )

    built = load_example(a.model, a)
    with Progress(transient=True) as progress:
        task = progress.add_task("orders", total=None)
        result = order_sweep(
            built,
            schedule=a.schedule,
            region=a.region,
            cap=a.cap,
            arch=a.arch,
            engine=a.engine,
            started=lambda region, n: progress.update(task, description=f"orders of {region}", total=n),
            done=lambda: progress.advance(task),
        )
    result = {"model": a.model, **result}
    rows, region = result["orders"], result["region"]
    if write_json(result, a):
        return 0
    print_table(
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


def register_run(sub) -> None:
    """The ``run`` command's flags."""
    r = sub.add_parser("run", help="compile a model file, simulate it and check it against PyTorch")
    add_model_args(r)
    r.add_argument("--save", metavar="FILE", help="write the detailed result (per-node counters, spans) for `report`")
    r.add_argument("--estimate", action="store_true", help="print the cycle model's preview instead of simulating")
    r.add_argument("--timeline", metavar="FILE", help="draw the regions' timeline as a Gantt chart (.png or .svg)")
    add_engine_arg(r)
    add_shortcut_args(r)
    add_sample_arg(r)
    add_pieces_args(r)
    r.set_defaults(fn=cmd_run)


def register_study(sub) -> None:
    """The ``study`` command's flags."""
    st = sub.add_parser("study", help="compare fusion schedules: cycles, speedup, FLOPs, memory traffic")
    add_example_file_args(st)
    st.add_argument("--schedules", help="comma-separated subset (unfused,layer,full,...)")
    st.add_argument("--arch", default="comal")
    st.add_argument(
        "--strategy",
        default="sequential",
        help=STRATEGY_HELP,
    )
    st.add_argument("--node-budget", type=int, default=100_000)
    st.add_argument("--order", help="dataflow order of every region: auto (default) | plain (the lowering's own)")
    st.add_argument("--json", action="store_true")
    st.add_argument("-o", "--output", help="also write the JSON here")
    add_engine_arg(st)
    add_shortcut_args(st)
    add_sample_arg(st)
    st.set_defaults(fn=cmd_study)


def register_order_sweep(sub) -> None:
    """The ``order-sweep`` command's flags."""
    o = sub.add_parser("order-sweep", help="simulate every dataflow order of a region; cycles per order")
    add_example_file_args(o)
    o.add_argument("--schedule", default="full", help="fusion schedule (default full)")
    o.add_argument("--region", help="region to sweep (needed when the schedule has several)")
    o.add_argument("--cap", type=int, default=64, help="at most this many orders")
    o.add_argument("--arch", default="comal")
    o.add_argument("--json", action="store_true")
    o.add_argument("-o", "--output", help="also write the JSON here")
    add_engine_arg(o)
    o.set_defaults(fn=cmd_order_sweep)
