"""The fabric: what running regions side by side buys on a finite array, and what fits.

For GCN, GraphSAGE, SAE and GPT-BigBird on a finite preset (default ``amber``: 384 compute and
128 memory units, the `rda` FIFOs and memory model, 512 cycles per configuration) it prints, per
model and fitting built-in schedule, the sum of the regions' own cycles, the sequential and the
concurrent makespan (the concurrent one simulated with the regions that overlap sharing the
memory model), each strategy's mean utilization, and for full fusion whether it fits and, if
not, how many regions `schedule="auto"` split it into. One JSON line per row, then a table.

    python benchmarks/fabric.py -o docs/results/fabric.json [--arch amber] [--skip-auto]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
os.environ.setdefault("TMPDIR", str(ROOT / "build" / "tmp"))
os.makedirs(os.environ["TMPDIR"], exist_ok=True)

import fuseflow  # noqa: E402
from fuseflow.fabric.resources import FitError  # noqa: E402
from fuseflow.model_files import example  # noqa: E402

SCHEDULES = ("unfused", "layer", "full")


def _cases():
    gcn = example("gcn", EXAMPLES)
    gpt_bigbird = example("gpt_bigbird", EXAMPLES)
    graphsage = example("graphsage", EXAMPLES)
    sae = example("sae", EXAMPLES)

    return [
        ("GCN karate", gcn, {}),
        ("GraphSAGE karate", graphsage, {}),
        ("SAE", sae, {}),
        ("GPT-BigBird seq32", gpt_bigbird, {"seq": 32}),
    ]


def _utilization(res) -> dict:
    frac = res.utilization.fraction
    return {k: round(v, 4) for k, v in (frac or res.utilization.mean).items()}


def measure(name: str, mod, options: dict, arch: str, auto: bool) -> list[dict]:
    model, args, formats = mod.build(**options)
    rows = []
    auto_row: dict | None = None  # schedule="auto" is planned once per model
    for schedule in SCHEDULES:
        row: dict = {"model": name, "schedule": schedule, "arch": arch}
        try:
            prog = fuseflow.compile(model, args, formats=formats, schedule=schedule, arch=arch)
        except FitError as e:
            row.update(fits=False, why=str(e).split(";")[0])
            if auto and auto_row is not None:
                row.update(auto_row)
            elif auto:
                t0 = time.perf_counter()
                try:
                    found = fuseflow.compile(model, args, formats=formats, schedule="auto", arch=arch)
                except fuseflow.FuseflowError as err:  # recorded, the other rows still run
                    row.update(auto_error=str(err).splitlines()[0][:200])
                else:
                    row.update(auto_regions=len(found.graphs), auto_plan_s=round(time.perf_counter() - t0, 1))
                    res = found.simulate()
                    res.check()
                    row.update(auto_cycles=res.cycles)
                auto_row = {k: v for k, v in row.items() if k.startswith("auto")}
            rows.append(row)
            continue
        need = prog.resources()
        row.update(
            fits=True,
            regions=len(prog.graphs),
            peak_compute=max(d["compute"] for d in need.values()),
            peak_memory=max(d["memory"] for d in need.values()),
        )
        t0 = time.perf_counter()
        seq = prog.simulate()
        seq.check()
        t1 = time.perf_counter()
        con = prog.simulate(strategy="concurrent")
        con.check()
        t2 = time.perf_counter()
        row.update(
            region_cycles=seq.serial_cycles,
            sequential=seq.cycles,
            concurrent=con.cycles,
            speedup=round(seq.cycles / con.cycles, 3),
            contention=round(
                max(s.cycles / r.cycles for s, r in zip(con.timeline, con.regions) if r.cycles) if con.regions else 1.0,
                3,
            ),
            util_sequential=_utilization(seq),
            util_concurrent=_utilization(con),
            sim_s=[round(t1 - t0, 2), round(t2 - t1, 2)],
        )
        rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="amber")
    ap.add_argument("--skip-auto", action="store_true", help="do not plan the schedules that do not fit")
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    rows = []
    for name, mod, options in _cases():
        for row in measure(name, mod, options, a.arch, not a.skip_auto):
            print(json.dumps(row), flush=True)
            rows.append(row)
    if a.output:
        Path(a.output).write_text(json.dumps(rows, indent=1) + "\n")
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"regions on the fabric of {a.arch}")
    heads = [
        "model",
        "schedule",
        "regions",
        "sum",
        "sequential",
        "concurrent",
        "speedup",
        "util seq c/m",
        "util con c/m",
    ]
    for h in heads:
        t.add_column(h, justify="left" if h in ("model", "schedule") else "right")
    for r in rows:
        if not r["fits"]:
            split = f"split into {r['auto_regions']} by auto: {r['auto_cycles']:,}" if "auto_regions" in r else ""
            split = r.get("auto_error", split)[:60]
            t.add_row(r["model"], r["schedule"], "does not fit", r["why"][:48], split, "", "", "", "")
            continue
        us, uc = r["util_sequential"], r["util_concurrent"]
        t.add_row(
            r["model"],
            r["schedule"],
            str(r["regions"]),
            f"{r['region_cycles']:,}",
            f"{r['sequential']:,}",
            f"{r['concurrent']:,}",
            f"{r['speedup']:.2f}x",
            f"{us['compute']:.1%}/{us['memory']:.1%}",
            f"{uc['compute']:.1%}/{uc['memory']:.1%}",
        )
    Console(width=200).print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
