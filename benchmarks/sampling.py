"""Sampled simulation against whole runs: error, interval coverage, wall time (docs/sampling.md).

    python benchmarks/sampling.py --tier quick -o docs/results/sampling.json
    python benchmarks/sampling.py --only sage:ogbn-mag:full --no-whole -o build/sage_mag.json
    python benchmarks/sampling.py --only gpt:block32:partial --whole-from docs/results/paper_paper.json

Every point (an application on a dataset under a fusion schedule, built as `benchmarks/paper.py`
builds Figure 12's) is simulated sampled (`--sample`, default ±2% at 95%) and whole, in one
process, one after the other, each output checked against PyTorch. A point's whole-run cycles
may be taken from a saved paper run instead (`--whole-from docs/results/paper_paper.json`:
the simulator is deterministic, so they are the cycles a whole run gives; its wall time is then
not measured). Prints a table and writes JSON: per point the whole and sampled cycles, the
error, the interval and whether it covers the whole run, units simulated of total, regions run
whole, and both wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("TMPDIR", str(ROOT / "build" / "tmp"))
os.makedirs(os.environ["TMPDIR"], exist_ok=True)

import fuseflow  # noqa: E402
from fuseflow.cli.common import print_table  # noqa: E402

GRAPHS = ("cora", "cora-ml", "dblp")
TIERS = {
    "smoke": [("gcn", "cora", "unfused")],
    "quick": [(a, d, s) for a in ("gcn", "sage") for d in GRAPHS for s in ("unfused", "layer", "full")],
    "medium": [
        (a, d, s) for a in ("gcn", "sage") for d in (*GRAPHS, "ogbl-collab") for s in ("unfused", "layer", "full")
    ],
}


ARCH = {"arch": {"max_cycles": 10**12, "max_fifo_mib": 16384}}
"""The default machine with the paper tier's limits (benchmarks/paper.py `PAPER_ARCH`): the
largest whole runs here pass 10^9 cycles."""


def build(app: str, dataset: str):
    """The Figure 12 model of `app` on `dataset` (benchmarks/paper.py)."""
    return _paper()._build(app, dataset)


def _paper():
    from fuseflow.model_files import python_file

    return python_file("paper", ROOT / "benchmarks")


def setup(app: str, dataset: str, schedule: str) -> tuple[tuple, Any, dict, dict, dict]:
    """A point as `benchmarks/paper.py` runs it: (model, args, formats), the schedule to compile,
    compile options, simulate options and the comparison's tolerance. GPT (dataset ``blockB``:
    GPT-3 Small at mask block B) compiles its paper schedules (`partial`: FuseFlow's split per
    block; `full`: the cross-block one) with the raised node budget, simulates with the region
    memo (its decoders and heads are identical: sampled once each, docs/sampling.md) and
    compares with GPT's tolerance."""
    if app != "gpt":
        return build(app, dataset), schedule, {}, {}, {}
    from fuseflow.model_files import example

    paper = _paper()
    gpt = example("gpt_bigbird", ROOT / "examples")
    geo = {**paper.gpt_geometry("paper"), "block": int(dataset.removeprefix("block"))}
    built = gpt.build(**geo)
    named = {"partial": gpt.transformer_schedule(), "full": gpt.fuseflow_full_schedule(geo["layers"])}
    tol = {"rtol": 1e-5 * 64, "atol": 1e-5 * 64}
    return built, named.get(schedule, schedule), {"node_budget": paper.GPT_NODE_BUDGET}, {"memo": True}, tol


def saved_cycles(path: str | None) -> dict[tuple[str, str, str], int]:
    """Whole-run cycles per (app, dataset, schedule) from a saved `benchmarks/paper.py` JSON."""
    if not path:
        return {}
    out = {}
    for row in json.loads(Path(path).read_text())["rows"]:
        if row.get("figure") == "12" and isinstance(row.get("cycles"), dict):
            for schedule, cycles in row["cycles"].items():
                if cycles:
                    out[(row["app"], row["dataset"], schedule)] = int(cycles)
    return out


def measure(app: str, dataset: str, schedule: str, sample: str, whole: int | None, run_whole: bool) -> dict:
    """One point, sampled then whole (unless its whole cycles are given, or not wanted)."""
    (model, args, formats), compiled, copts, sopts, tol = setup(app, dataset, schedule)
    t = time.perf_counter()
    prog = fuseflow.compile(model, args, formats=formats, schedule=compiled, arch=ARCH, **copts)
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    res = prog.simulate(sample=sample, arch=ARCH, **sopts)
    sampled_s = time.perf_counter() - t
    res.check(**tol)
    row = {
        "point": f"{app}:{dataset}:{schedule}",
        "compile_s": round(compile_s, 1),
        "sampled_cycles": res.cycles,
        "interval": list(res.interval or (res.cycles, res.cycles)),
        "sampled": res.sampled.to_json() if res.sampled else None,
        "sampled_s": round(sampled_s, 1),
        "whole_cycles": whole,
        "whole_s": None,
        "whole_source": "saved" if whole is not None else None,
    }
    if whole is None and run_whole:
        t = time.perf_counter()
        plain = prog.simulate(arch=ARCH, **sopts)
        row["whole_s"] = round(time.perf_counter() - t, 1)
        plain.check(**tol)
        row["whole_cycles"], row["whole_source"] = plain.cycles, "simulated"
    if row["whole_cycles"]:
        w = row["whole_cycles"]
        row["error"] = (res.cycles - w) / w
        row["covered"] = row["interval"][0] <= w <= row["interval"][1]
    return row


def table(rows: list[dict]) -> None:
    def pct(x):
        return "-" if x is None else f"{x:+.3%}"

    print_table(
        "sampled vs whole simulation",
        [
            [
                r["point"],
                r["whole_cycles"] or "-",
                r["sampled_cycles"],
                pct(r.get("error")),
                f"±{(r['interval'][1] - r['interval'][0]) / 2 / max(r['sampled_cycles'], 1):.2%}",
                {True: "yes", False: "NO", None: "-"}[r.get("covered")],
                f"{r['sampled']['units']}/{r['sampled']['total']}" if r["sampled"] else "-",
                len(r["sampled"]["whole"]) if r["sampled"] else "-",
                r["sampled_s"],
                r["whole_s"] if r["whole_s"] is not None else "-",
            ]
            for r in rows
            if "failed" not in r
        ]
        + [[r["point"], "failed", r["failed"][:60], "", "", "", "", "", "", ""] for r in rows if "failed" in r],
        ["point", "whole", "sampled", "error", "interval", "covers", "units", "whole regions", "sampled s", "whole s"],
    )


def markdown(runs: list[dict]) -> str:
    """The results page's table: every row of the runs (saved JSONs), with each run's command."""
    head = ["point", "whole cycles", "sampled", "error", "interval", "covers", "units", "whole regions"]
    out = ["| " + " | ".join(head + ["sampled s", "whole s"]) + " |"]
    out.append("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for run in runs:
        for r in run["rows"]:
            if "failed" in r:
                out.append(f"| {r['point']} | failed: {r['failed'][:80]} | | | | | | | | |")
                continue
            s = r["sampled"] or {}
            half = (r["interval"][1] - r["interval"][0]) / 2 / max(r["sampled_cycles"], 1)
            err = "-" if r.get("error") is None else f"{r['error']:+.3%}"
            cover = {True: "yes", False: "**no**", None: "-"}[r.get("covered")]
            whole = (
                f"{r['whole_cycles']:,}" + (" (saved)" if r.get("whole_source") == "saved" else "")
                if r["whole_cycles"]
                else "-"
            )
            out.append(
                f"| {r['point']} | {whole} | {r['sampled_cycles']:,} | {err} | ±{half:.2%} | {cover} | "
                f"{s.get('units', 0)}/{s.get('total', 0)} | {len(s.get('whole', {}))} | {r['sampled_s']} | "
                f"{r['whole_s'] if r['whole_s'] is not None else '-'} |"
            )
    agree, groups = rankings([r for run in runs for r in run["rows"]])
    out += [
        "",
        f"Schedules ranked by cycles, per application and dataset: sampled and whole agree on {agree} of {groups}.",
    ]
    out += ["", "Commands:", ""] + [f"- `{run['command']}` ({run['wall_s']:.0f} s)" for run in runs]
    return "\n".join(out) + "\n"


def rankings(rows: list[dict]) -> tuple[int, int]:
    """In how many (application, dataset) groups of two or more schedules, both measured whole,
    the schedules rank the same by sampled cycles as by whole cycles (ties by whole cycles
    count as agreeing either way)."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        if "failed" not in r and r.get("whole_cycles"):
            groups.setdefault(r["point"].rsplit(":", 1)[0], []).append(r)
    agree = total = 0
    for members in groups.values():
        if len(members) < 2:
            continue
        total += 1
        by_whole = sorted(members, key=lambda r: r["whole_cycles"])
        agree += all(
            a["sampled_cycles"] <= b["sampled_cycles"] or a["whole_cycles"] == b["whole_cycles"]
            for a, b in zip(by_whole, by_whole[1:])
        )
    return agree, total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tier", default="quick", choices=sorted(TIERS))
    ap.add_argument("--only", help="comma-separated app:dataset:schedule points instead of a tier")
    ap.add_argument("--sample", default="2%@95%", help="the target, ERROR[@CONFIDENCE] (default 2%%@95%%)")
    ap.add_argument("--whole-from", help="a saved benchmarks/paper.py JSON whose Figure 12 cycles stand for whole runs")
    ap.add_argument("--no-whole", action="store_true", help="do not simulate points whole (their error stays unknown)")
    ap.add_argument("-o", "--output", help="write the rows as JSON here")
    ap.add_argument("--from", dest="source", help="saved JSONs (comma-separated): print their rows as Markdown")
    a = ap.parse_args(argv)
    if a.source:
        print(markdown([json.loads(Path(p).read_text()) for p in a.source.split(",")]), end="")
        return 0
    points = [tuple(p.split(":")) for p in a.only.split(",")] if a.only else TIERS[a.tier]
    saved = saved_cycles(a.whole_from)
    rows = []
    t0 = time.perf_counter()
    for app, dataset, schedule in points:
        print(f"{app}:{dataset}:{schedule} ...", file=sys.stderr, flush=True)
        try:
            rows.append(measure(app, dataset, schedule, a.sample, saved.get((app, dataset, schedule)), not a.no_whole))
        except fuseflow.FuseflowError as e:  # a stopped point is a row, never a lost run
            rows.append({"point": f"{app}:{dataset}:{schedule}", "failed": str(e).splitlines()[0][:200]})
            print(f"  failed: {rows[-1]['failed']}", file=sys.stderr, flush=True)
        if a.output:  # what has finished survives a stopped run
            Path(a.output).write_text(json.dumps(summary(rows, a, time.perf_counter() - t0), indent=2))
    table(rows)
    s = summary(rows, a, time.perf_counter() - t0)
    print(json.dumps({k: v for k, v in s.items() if k != "rows"}, indent=2))
    if a.output:
        Path(a.output).write_text(json.dumps(s, indent=2))
    return 0


def summary(rows: list[dict], a, wall: float) -> dict:
    """The rows and what they add up to, over the points where something was sampled (the rest
    ran whole): median and worst |error|, how many intervals cover the whole run."""
    sampled = [r for r in rows if r.get("error") is not None and r["sampled"] and r["sampled"]["units"]]
    errs = sorted(abs(r["error"]) for r in sampled)
    return {
        "command": "python benchmarks/sampling.py " + " ".join(sys.argv[1:]),
        "sample": a.sample,
        "wall_s": round(wall, 1),
        "points": len(rows),
        "median_abs_error": errs[len(errs) // 2] if errs else None,
        "worst_abs_error": errs[-1] if errs else None,
        "covered": sum(bool(r.get("covered")) for r in sampled),
        "with_sampled_regions": len(sampled),
        "rows": rows,
    }


if __name__ == "__main__":
    raise SystemExit(main())
