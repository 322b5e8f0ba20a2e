"""Filling the fabric: the planner's lanes and blocks against the one-lane planner and a simulated sweep.

For every shipped example on a finite preset (``amber``: 384 compute / 128 memory units; and
``amber-half``: 192 / 64, the same FIFOs and memory) it reports, per model:

- ``one_lane``: ``schedule="auto"`` with ``max_lanes=1, max_block=1`` (the planner without
  lanes or blocks), simulated under ``strategy="auto"``;
- ``lanes``: ``schedule="auto"`` with ``max_block=1`` (lanes chosen, no blocks: the sweep's
  kind of program), simulated under ``strategy="auto"``, with the planner's wall time;
- ``auto``: ``schedule="auto"`` (lanes and blocks chosen), simulated under ``strategy="auto"``,
  with the planner's wall time and the busy units;
- ``best``: the fastest point of the sweep: every built-in schedule that fits x uniform lanes
  1/2/4/8/16 (each region at its fastest predicted option of at most that many lanes) x
  ``sequential``/``concurrent``/``pipeline:4``, every point simulated and checked against PyTorch;
- ``bound``: the fabric's lower bound for the chosen program: the larger of its critical path
  (regions' own cycles along the longest dependence chain) and its busy unit-cycles over the
  units (the worse class);
- the cycle model's error per region over the sweep's sequential runs at lanes 1-16 (median
  and worst of simulated / estimated; ``--model-error`` measures only this, without planning).

One JSON line per model, then a table.

    python benchmarks/fabric_fill.py -o docs/results/fabric_fill.json [--arch amber] [--only GPT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
os.environ.setdefault("TMPDIR", str(ROOT / "build" / "tmp"))
os.makedirs(os.environ["TMPDIR"], exist_ok=True)

import fuseflow  # noqa: E402
from fuseflow.fabric.dag import dependencies  # noqa: E402
from fuseflow.fabric.resources import lanes_of  # noqa: E402
from fuseflow.fabric.run import program_tasks  # noqa: E402
from fuseflow.model_files import example  # noqa: E402
from fuseflow.planning import lanes  # noqa: E402
from fuseflow.schedule.rules import Schedule, as_schedule  # noqa: E402
from fuseflow.sim.arch import Arch  # noqa: E402

ARCHES = {
    "amber": "amber",
    "amber-half": {"preset": "amber", "fabric": {"compute": 192, "memory": 64, "reconfig_cycles": 512}},
}
BUILTINS = ("unfused", "layer", "full", "op")
UNIFORM = (1, 2, 4, 8, 16)
STRATEGIES = ("sequential", "concurrent", "pipeline:4")


def _cases():
    gcn = example("gcn", EXAMPLES)
    gcn_layer = example("gcn_layer", EXAMPLES)
    gpt_bigbird = example("gpt_bigbird", EXAMPLES)
    graphsage = example("graphsage", EXAMPLES)
    kernels = example("kernels", EXAMPLES)
    sae = example("sae", EXAMPLES)
    spgemm_chain = example("spgemm_chain", EXAMPLES)

    return [
        ("GCN layer", gcn_layer, {}),
        ("GCN karate", gcn, {}),
        ("GraphSAGE karate", graphsage, {}),
        ("SAE", sae, {}),
        ("SpGEMM chain", spgemm_chain, {}),
        ("SDDMM", kernels, {"kernel": "sddmm"}),
        ("GPT-BigBird seq32", gpt_bigbird, {"seq": 32}),
    ]


def _busy(res) -> dict:
    frac = res.utilization.fraction or {}
    return {k: round(v, 4) for k, v in frac.items()}


def lower_bound(res, arch: Arch) -> int:
    """max(critical path of the regions' own cycles, busy unit-cycles / units of the worse class)."""
    prog = res.program
    tasks = program_tasks(prog)
    own = {r.name: r.cycles for r in res.regions}
    cost = [float(own.get(t.name, 0)) for t in tasks]
    deps = dependencies(tasks)
    path = [0.0] * len(tasks)
    for i, d in enumerate(deps):
        path[i] = cost[i] + max((path[j] for j in d), default=0.0)
    fabric = arch.fabric
    area = 0.0
    if fabric is not None:
        per_class = {
            cls: sum(c * t.units.get(cls, 0) for t, c in zip(tasks, cost, strict=True)) / fabric.capacity(cls)
            for cls in ("compute", "memory")
        }
        area = max(per_class.values())
    return int(max(max(path, default=0.0), area))


def sweep(
    model, args, formats, arch_spec, errors: list[tuple[float, str]], strategies: tuple[str, ...] = STRATEGIES
) -> list[dict]:
    """Every built-in x uniform lanes x strategy, simulated and checked."""
    arch = Arch.resolve(arch_spec)
    points = []
    for builtin in BUILTINS:
        try:
            base = fuseflow.compile(model, args, formats=formats, schedule=builtin, arch=arch_spec)
        except fuseflow.FuseflowError:
            continue  # does not fit
        menu = lanes.lane_menu(base, arch)
        seen: set = set()
        for f in UNIFORM:
            choice = lanes.uniform(menu, f)
            key = tuple(sorted((r, o.par) for r, o in choice.items()))
            if key in seen:
                continue
            seen.add(key)
            rules = lanes.lane_rules(choice, base.region_ops, base.orders)
            try:
                prog = (
                    base
                    if f == 1
                    else fuseflow.compile(
                        model,
                        args,
                        formats=formats,
                        schedule=Schedule.rules(*as_schedule(builtin).ruleset, *rules),
                        arch=arch_spec,
                    )
                )
            except fuseflow.FuseflowError as e:
                points.append({"schedule": builtin, "lanes": f, "error": str(e).splitlines()[0][:120]})
                continue
            est = {r.name: r.cycles for r in prog.estimate().regions}
            for strategy in strategies:
                row = {"schedule": builtin, "lanes": f, "strategy": strategy}
                try:
                    res = prog.simulate(strategy=strategy)
                    res.check()
                except fuseflow.FuseflowError as e:
                    row["error"] = str(e).splitlines()[0][:120]
                else:
                    row["cycles"] = res.cycles
                    if strategy == "sequential":
                        errors += [
                            (r.cycles / max(est[r.name], 1.0), f"{builtin} x{f} {r.name} {_par(choice, r.name)}")
                            for r in res.regions
                            if r.name in est and r.cycles > 0
                        ]
                points.append(row)
    return points


def measure(name: str, mod, options: dict, arch_name: str, do_sweep: bool) -> dict:
    spec = ARCHES[arch_name]
    arch = Arch.resolve(spec)
    model, args, formats = mod.build(**options)
    row: dict = {"model": name, "arch": arch_name}
    try:
        old = fuseflow.compile(model, args, formats=formats, schedule="auto", arch=spec, max_lanes=1, max_block=1)
        res_old = old.simulate(strategy="auto")
        res_old.check()
        row["one_lane"] = res_old.cycles
    except fuseflow.FuseflowError as e:
        row["one_lane_error"] = str(e).splitlines()[0][:160]
    t0 = time.perf_counter()
    laned = fuseflow.compile(model, args, formats=formats, schedule="auto", arch=spec, max_block=1)
    row["lanes_plan_s"] = round(time.perf_counter() - t0, 1)
    res_laned = laned.simulate(strategy="auto")
    res_laned.check()
    row["lanes_only"] = res_laned.cycles
    row["lanes_bound"] = lower_bound(res_laned, arch)
    t0 = time.perf_counter()
    prog = fuseflow.compile(model, args, formats=formats, schedule="auto", arch=spec)
    row["plan_s"] = round(time.perf_counter() - t0, 1)
    res = prog.simulate(strategy="auto")
    res.check()
    row.update(auto=res.cycles, strategy=res.strategy, busy=_busy(res), bound=lower_bound(res, arch))
    row["lanes"] = {g.name: lanes_of(g) for g in prog.graphs if lanes_of(g) > 1}
    row["blocks"] = {g.name: g.block for g in prog.graphs if g.block}
    if do_sweep:
        errors: list[tuple[float, str]] = []
        points = sweep(model, args, formats, spec, errors)
        done = [p for p in points if "cycles" in p]
        best = min(done, key=lambda p: p["cycles"])
        row.update(best=best["cycles"], best_point=f"{best['schedule']} x{best['lanes']} {best['strategy']}")
        row["sweep_points"], row["sweep_failed"] = len(done), len(points) - len(done)
        row["sweep_failures"] = sorted({p["error"] for p in points if "error" in p})[:3]
        row.update(error_summary(errors))
    return row


def _par(choice: dict, region: str) -> str:
    """A region's lanes in a uniform assignment (``k:8``, ``1`` for one lane); relayouts have none."""
    o = choice.get(region)
    return "-" if o is None else (o.par or "1") + (f" b{o.block}" if o.block else "")


def error_summary(errors: list[tuple[float, str]]) -> dict:
    """Median and worst of the model's per-region errors (simulated / estimated), and where the
    worst is; also over distinct (schedule, lanes, region) runs, each once (a region a uniform
    factor leaves alone recurs in the sweep)."""
    if not errors:
        return {}
    worst = max(errors, key=lambda e: max(e[0], 1 / e[0]))
    # a run is its schedule, region and lanes: the uniform factor ("x8") that reached it is dropped
    distinct = list({(w.split()[0], *w.split()[2:]): e for e, w in errors}.values())
    return {
        "model_error_median": round(statistics.median(abs(e - 1.0) for e, _ in errors), 4),
        "model_error_worst": round(max(worst[0], 1 / worst[0]), 3),
        "model_error_worst_at": worst[1],
        "model_error_distinct": len(distinct),
        "model_error_distinct_median": round(statistics.median(abs(e - 1.0) for e in distinct), 4),
        "model_error_over_1_33": sum(max(e, 1 / e) > 1.33 for e in distinct),
    }


def model_error(name: str, mod, options: dict, arch_name: str, everything: list[tuple[float, str]]) -> dict:
    """The cycle model's error alone: the sweep's sequential runs, no planning (`--model-error`);
    the runs are also added to `everything`, labelled with the model."""
    model, args, formats = mod.build(**options)
    errors: list[tuple[float, str]] = []
    sweep(model, args, formats, ARCHES[arch_name], errors, strategies=("sequential",))
    label = name.replace(" ", "_")
    for e, w in errors:  # "layer x8 main j:8" -> "layer x8 SDDMM:main j:8"
        builtin, factor, region, *par = w.split()
        everything.append((e, " ".join([builtin, factor, f"{label}:{region}", *par])))
    return {"model": name, "arch": arch_name, **error_summary(errors)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", help="also write the rows here (JSON list)")
    ap.add_argument("--arch", action="append", choices=sorted(ARCHES), help="default: every finite preset here")
    ap.add_argument("--only", help="models whose name contains this")
    ap.add_argument("--no-sweep", action="store_true", help="skip the simulated sweep")
    ap.add_argument(
        "--model-error", action="store_true", help="only the cycle model's error over the sweep's sequential runs"
    )
    a = ap.parse_args(argv)
    if a.model_error:
        return _model_errors(a)
    rows = []
    for arch_name in a.arch or list(ARCHES):
        for name, mod, options in _cases():
            if a.only and a.only.lower() not in name.lower():
                continue
            row = measure(name, mod, options, arch_name, not a.no_sweep)
            print(json.dumps(row), flush=True)
            rows.append(row)
    if a.output:
        Path(a.output).write_text(json.dumps(rows, indent=1))
    header = [
        "model",
        "arch",
        "one lane",
        "lanes",
        "best",
        "lanes/best",
        "lanes/bound",
        "plan s",
        "auto (lanes+blocks)",
        "plan s",
        "busy c/m",
        "err med/worst",
    ]
    print(" | ".join(header))
    for r in rows:
        best = r.get("best")
        busy = r.get("busy", {})
        print(
            " | ".join(
                str(x)
                for x in (
                    r["model"],
                    r["arch"],
                    f"{r.get('one_lane', '-'):,}" if "one_lane" in r else "-",
                    f"{r['lanes_only']:,}",
                    f"{best:,} ({r['best_point']})" if best else "-",
                    f"{r['lanes_only'] / best:.2f}" if best else "-",
                    f"{r['lanes_only'] / max(r['lanes_bound'], 1):.2f}",
                    r["lanes_plan_s"],
                    f"{r['auto']:,}",
                    r["plan_s"],
                    f"{busy.get('compute', 0):.0%} / {busy.get('memory', 0):.0%}",
                    f"{r.get('model_error_median', '-')} / {r.get('model_error_worst', '-')}",
                )
            )
        )
    return 0


def _model_errors(a) -> int:
    rows: list[dict] = []
    everything: list[tuple[float, str]] = []
    for arch_name in a.arch or list(ARCHES):
        for name, mod, options in _cases():
            if a.only and a.only.lower() not in name.lower():
                continue
            rows.append(model_error(name, mod, options, arch_name, everything))
            print(json.dumps(rows[-1]), flush=True)
        rows.append({"model": "all", "arch": arch_name, **error_summary(everything)})
        everything = []
    if a.output:
        Path(a.output).write_text(json.dumps(rows, indent=1))
    print("model | arch | median | worst (where) | distinct runs | their median | over 1.33x")
    for r in rows:
        print(
            f"{r['model']} | {r['arch']} | {100 * r.get('model_error_median', 0):.1f}% | "
            f"{r.get('model_error_worst', '-')}x ({r.get('model_error_worst_at', '')}) | "
            f"{r.get('model_error_distinct', 0)} | {100 * r.get('model_error_distinct_median', 0):.1f}% | "
            f"{r.get('model_error_over_1_33', 0)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
