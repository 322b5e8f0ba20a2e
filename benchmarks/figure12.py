"""FuseFlow's main fusion study (its Figure 12) at paper sizes: speedup of partial and full fusion
over unfused, per application and dataset.

    python benchmarks/figure12.py                       # the points that fit in the hour (--tier medium)
    python benchmarks/figure12.py --tier paper          # every point, GPT-3 Small at full size
    python benchmarks/figure12.py --only gcn,sage --datasets cora,pubmed --schedules unfused,layer
    python benchmarks/figure12.py --only gcn --datasets pubmed --points 2   # two points at once

Every point (application, dataset, schedule) runs in a process of its own: compile, the cycle
model's estimate, simulate (memoised: identical decoders are simulated once, `--memo-dir` shares
the memo between points), and a check of every output against eager PyTorch (SimResult.check's
tolerance). The parent watches each point's memory (the process tree's resident set) and stops it
at `--max-rss-gb`, and at `--timeout` seconds; a point stopped so keeps its estimate and says why.
It writes one JSON (`-o`), a speedup-over-unfused bar chart (`--plot`, SVG or PNG) and prints a
Markdown table (docs/results.md). Stand-in graphs (`examples/graphs.py: STANDINS`) are marked.

Paper sizes: GCN and GraphSAGE, 2 layers, hidden 16, 50% weight sparsity, on Cora, CiteSeer,
PubMed (../shared/data) and stand-ins for Cora-ML, DBLP, ogbl-collab and ogbn-mag; SAE batch 32,
90% weight sparsity, input 224x224 (hidden 256), 512x512 and 1024x1024 (hidden 512); GPT-3 Small
(12 decoders, seq 1024, d_model 768, 12 heads, FFN 3072) with BigBird blocks 16/32/64.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
PLANETOID = ROOT.parent / "shared" / "data" / "planetoid"
SCHEDULES = {"gcn": "unfused,layer,full", "sage": "unfused,layer,full", "sae": "unfused,layer,full"}
SCHEDULES["gpt"] = "unfused,fuseflow,full"  # fuseflow: FuseFlow's 3-region split (partial fusion)
PARTIAL = {"layer": "partial", "fuseflow": "partial", "full": "full", "unfused": "unfused"}

GRAPHS = {  # dataset -> (graph= for examples/gcn.py and graphsage.py, extra build options, stand-in?)
    "cora": (str(PLANETOID / "cora.npz"), {}, False),
    "citeseer": (str(PLANETOID / "citeseer.npz"), {}, False),
    "pubmed": (str(PLANETOID / "pubmed.npz"), {"features": 500}, False),  # features not shipped: random 10%
    "cora-ml": ("standin:cora-ml", {}, True),
    "dblp": ("standin:dblp", {}, True),
    "ogbl-collab": ("standin:ogbl-collab", {}, True),
    "ogbn-mag": ("standin:ogbn-mag", {}, True),
}
SAE_SIZES = {"224x224": (50_176, 256), "512x512": (262_144, 512), "1024x1024": (1_048_576, 512)}
GPT3_SMALL = dict(seq=1024, d_model=768, heads=12, d_ff=3072, layers=12)
GPT_BLOCKS = {"block16": 16, "block32": 32, "block64": 64}

TIERS = {
    # medium: what this machine finishes within the hour (the artifact's medium mode skips the
    # largest points too); GPT at seq 256 / d_model 128 / 2 heads, 12 decoders
    "medium": {
        "gcn": ["cora", "citeseer", "pubmed", "cora-ml", "dblp", "ogbl-collab"],
        "sage": ["cora", "citeseer", "pubmed", "cora-ml", "dblp", "ogbl-collab"],
        "sae": ["224x224", "512x512"],
        "gpt": ["block16", "block32", "block64"],
    },
    "paper": {
        "gcn": list(GRAPHS),
        "sage": list(GRAPHS),
        "sae": list(SAE_SIZES),
        "gpt": list(GPT_BLOCKS),
    },
}
GPT_MEDIUM = dict(seq=256, d_model=128, heads=2, d_ff=512, layers=12)
SIM_BUDGET = {"medium": 5e9, "paper": 5e10}
"""Estimated ALU ops (the cycle model's, each structurally distinct region counted once: memoised
repeats cost nothing) above which a tier takes the estimate instead of simulating. The simulator
runs ~7-30M ALU ops per second on these graphs, so 5e9 is a few minutes."""
MAX_CYCLES = 10**12  # paper-scale runs pass the default 10^9 (GCN full fusion on ogbl-collab: ~7e9)


def build(app: str, dataset: str, tier: str):
    """(model, args, formats, schedule object or name's resolver) of one point."""
    from fuseflow.model_files import example  # lazily: the report alone needs no compiler

    if app in ("gcn", "sage"):
        mod = example("gcn" if app == "gcn" else "graphsage", EXAMPLES)
        graph, extra, _ = GRAPHS[dataset]
        return mod.build(graph=graph, max_features=None, **extra), {}
    if app == "sae":
        sae = example("sae", EXAMPLES)

        n_in, hidden = SAE_SIZES[dataset]
        # 1024x1024: two dense 1M x 512 weights pass 8 GB before pruning; torch sparse parameters
        # (random 10% kept, never dense) build in 15 s and compile under 7 GB
        sparse = n_in >= 1_048_576
        return sae.build(batch=32, n_in=n_in, n_hidden=hidden, weight_sparsity=0.9, sparse_weights=sparse), {}
    if app == "gpt":
        gpt_bigbird = example("gpt_bigbird", EXAMPLES)

        geometry = GPT3_SMALL if tier == "paper" else GPT_MEDIUM
        built = gpt_bigbird.build(block=GPT_BLOCKS[dataset], **geometry)
        return built, gpt_bigbird.schedules()
    raise ValueError(f"unknown application {app!r}")


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def distinct_alu_ops(prog, est) -> float:
    """The estimate's ALU ops with structurally identical regions (same graph, same shapes) once."""
    from fuseflow.sim.arch import Arch
    from fuseflow.sim.memo import structure_key

    arch, seen, total = Arch.resolve("comal"), set(), 0.0
    graphs = {g.name: g for g in prog.graphs}
    for r in est.regions:
        g = graphs.get(r.name)
        key = structure_key(g, {}, arch) if g is not None else None
        if key is None or key not in seen:
            total += r.alu_ops
        seen.add(key)
    return total


def study_arch() -> dict:
    """The comal preset with the cycle limit raised for paper sizes."""
    import tomllib
    from importlib import resources

    arch = tomllib.loads(resources.files("fuseflow").joinpath("configs", "comal.toml").read_text())["arch"]
    return {**arch, "max_cycles": MAX_CYCLES}


def run_point(
    app: str, dataset: str, schedule: str, tier: str, memo_dir: str | None, jobs: int, budget: float | None = None
) -> None:
    """One point, in this process: prints ``ESTIMATE {json}`` after compiling, then ``ROW {json}``."""
    import warnings

    warnings.filterwarnings("ignore")
    import fuseflow

    t0 = time.perf_counter()
    (model, args, formats), named = build(app, dataset, tier)
    t_build = time.perf_counter() - t0
    prog = fuseflow.compile(model, args, formats=formats, schedule=named.get(schedule, schedule))
    t_compile = time.perf_counter() - t0 - t_build
    arch = study_arch()
    est = prog.estimate(arch=arch)
    work = distinct_alu_ops(prog, est)
    first = {"estimated_cycles": int(est.cycles), "regions": len(prog.graphs), "estimated_alu_ops": int(work)}
    first["seconds"] = {"build": t_build, "compile": t_compile}
    print("ESTIMATE " + json.dumps(first), flush=True)
    budget = SIM_BUDGET[tier] if budget is None else budget
    if work > budget:
        print("ROW " + json.dumps({"status": f"estimate only: {work:.2g} ALU ops over the budget ({budget:.2g})"}))
        return
    from fuseflow.experiments.point import measure

    got = measure(
        (model, args, formats),
        program=prog,
        arch=arch,
        memo=memo_dir or True,
        jobs=jobs,
        progress=_progress_lines({r.name: r.cycles for r in est.regions}),
    )
    if got["status"] != "ok":
        print("ROW " + json.dumps({"status": got["status"]}), flush=True)
        return
    row = {
        "cycles": got["cycles"],
        "estimated_cycles": int(est.cycles),
        "regions": got["regions"],
        "memoised_regions": got["memoised_regions"],
        "alu_ops": got["alu_ops"],
        "max_abs_error": got["max_abs_error"],
        "check": "every output against eager PyTorch",
        "seconds": {
            "build": t_build,
            "compile": t_compile,
            "simulate": got["seconds"]["simulate"],
            "check": got["seconds"]["check"],
        },
        "peak_rss_gb_self": _rss_gb(),
    }
    print("ROW " + json.dumps(row), flush=True)


def _progress_lines(estimated: dict[str, float], every_s: float = 60.0):
    """A `simulate(progress=)` callback writing, at most once a minute, a line to the point's log
    (stderr): the region, its simulated cycles against its estimate, the rate and the time left
    at that rate (``tail -f`` a paper-size point's log to follow it)."""
    first: dict[str, tuple[float, int]] = {}  # region -> when and at which cycle it first reported
    last = [time.perf_counter()]

    def report(region: str, cycle: int) -> None:
        now = time.perf_counter()
        began, at = first.setdefault(region, (now, cycle))
        if now - last[0] < every_s or now <= began:
            return
        last[0] = now
        rate = (cycle - at) / (now - began)
        total = estimated.get(region, 0.0)
        share = f" of ~{total:,.0f} estimated ({100 * cycle / total:.1f}%)" if total else ""
        left = f", about {(total - cycle) / max(rate, 1e-9) / 60:.0f} min left" if total > cycle else ""
        print(
            f"PROGRESS {region}: {cycle:,} cycles{share}, {rate / 1e6:.1f}M cycles/s{left}", file=sys.stderr, flush=True
        )

    return report


def _tree_rss_bytes(pid: int) -> int:
    """Resident bytes of `pid` and its descendants (worker processes included)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return total


def measure(point: dict, args: argparse.Namespace) -> dict:
    """Run one point in a child process, watching its memory and time."""
    cmd = [sys.executable, __file__, "--point", json.dumps(point), "--tier", args.tier, "--jobs", str(args.jobs)]
    if args.budget is not None:
        cmd += ["--budget", str(args.budget)]
    if args.memo_dir:
        cmd += ["--memo-dir", args.memo_dir]
    start = time.perf_counter()
    out_path = Path(args.scratch) / f"{point['app']}-{point['dataset']}-{point['schedule']}.log"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    peak, status = 0, "ok"
    rows_path = out_path.with_suffix(".out")
    with open(out_path, "w") as log, open(rows_path, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=log, env=os.environ.copy())
        while proc.poll() is None:
            peak = max(peak, _tree_rss_bytes(proc.pid))
            if peak > args.max_rss_gb * 1e9:
                status = f"stopped: over {args.max_rss_gb:g} GB"
            elif time.perf_counter() - start > args.timeout:
                status = f"stopped: over {args.timeout:g} s"
            if status != "ok":
                subprocess.run(["pkill", "-KILL", "-P", str(proc.pid)], check=False)
                proc.kill()
                proc.wait()
                break
            time.sleep(0.2)
    lines = rows_path.read_text().splitlines()
    row = {**point, "size": size_of(point["app"], args.tier), "status": status}
    row["standin"] = GRAPHS.get(point["dataset"], (None, None, False))[2]
    for line in lines:
        if line.startswith("ESTIMATE "):
            row.update(json.loads(line[9:]))
        elif line.startswith("ROW "):
            row.update(json.loads(line[4:]))
    if status == "ok" and "cycles" not in row and row.get("status", "ok") == "ok":
        errors = [ln for ln in out_path.read_text().splitlines() if re.match(r"^[\w.]+(Error|Exception): ", ln)]
        row["status"] = short_failure("failed: " + (errors[-1] if errors else "no result (see the log)"))
    row["wall_s"] = round(time.perf_counter() - start, 2)
    row["peak_rss_gb"] = round(peak / 1e9, 3)
    return row


def size_of(app: str, tier: str) -> str:
    """What differs between tiers: GPT's geometry (the other applications run at paper size)."""
    if app != "gpt":
        return "paper"
    g = GPT3_SMALL if tier == "paper" else GPT_MEDIUM
    return f"{g['layers']} decoders, seq {g['seq']}, d_model {g['d_model']}, {g['heads']} heads, FFN {g['d_ff']}"


def short_failure(status: str) -> str:
    """``failed: Kind: message`` without the module path of the error class or the location."""
    m = re.match(r"failed: (?:[\w.]+\.)?(\w+(?:Error|Exception)): (?:.* error: )?(.*)", status)
    return (f"failed: {m.group(1)}: {m.group(2)}" if m else status)[:300]


def label(r: dict) -> str:
    """The application as tables and charts name it (GPT with its sequence length)."""
    if r["app"] != "gpt":
        return r["app"]
    return "gpt3-small" if "seq 1024" in r.get("size", "") else "gpt (seq 256)"


def merge(paths: list[str]) -> list[dict]:
    """Rows of several runs; a later file's row replaces an earlier one of the same point."""
    rows: dict[tuple, dict] = {}
    for path in paths:
        doc = json.loads(Path(path).read_text())
        for r in doc["rows"]:
            r.setdefault("size", size_of(r["app"], doc.get("tier", "medium")))
            r["status"] = short_failure(r["status"])
            rows[(r["app"], r["size"], r["dataset"], r["schedule"])] = r
    return list(rows.values())


def speedups(rows: list[dict]) -> None:
    """Adds `speedup` (unfused cycles / cycles) and `estimated_speedup` to every row."""
    base = {(r["app"], r.get("size"), r["dataset"]): r for r in rows if r["schedule"] == "unfused"}
    for r in rows:
        b = base.get((r["app"], r.get("size"), r["dataset"]))
        if b and r.get("cycles") and b.get("cycles"):
            r["speedup"] = round(b["cycles"] / r["cycles"], 3)
        if b and r.get("estimated_cycles") and b.get("estimated_cycles"):
            r["estimated_speedup"] = round(b["estimated_cycles"] / r["estimated_cycles"], 3)


def table(rows: list[dict]) -> str:
    head = (
        "| app | dataset | schedule | cycles | speedup vs unfused | estimate (cycle model) | est. speedup "
        "| wall s | peak RSS GB | max abs err | status |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
    )
    out = [head]
    for r in rows:
        name = r["dataset"] + (" (stand-in)" if r.get("standin") else "")
        cyc = f"{r['cycles']:,}" if r.get("cycles") else "—"
        est = f"{r['estimated_cycles']:,}" if r.get("estimated_cycles") else "—"
        err = f"{r['max_abs_error']:.1e}" if r.get("max_abs_error") is not None else "—"
        out.append(
            f"| {label(r)} | {name} | {r['schedule']} | {cyc} | {r.get('speedup', '—')} | {est} "
            f"| {r.get('estimated_speedup', '—')} | {r['wall_s']} | {r['peak_rss_gb']} | {err} | {_clip(r['status'])} |"
        )
    return "\n".join(out)


def _clip(text: str, n: int = 110) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def plot(rows: list[dict], path: str) -> None:
    """Speedup over unfused per (app, dataset), partial and full side by side (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(dict.fromkeys((label(r), r["dataset"]) for r in rows))
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(groups)), 4))
    for k, kind in enumerate(("partial", "full")):
        xs, ys, hatch = [], [], []
        for g, (app, ds) in enumerate(groups):
            r = next((r for r in rows if (label(r), r["dataset"]) == (app, ds) and PARTIAL[r["schedule"]] == kind), {})
            value, estimated = r.get("speedup"), False
            if value is None and r.get("estimated_speedup") is not None:
                value, estimated = r["estimated_speedup"], True
            if value is not None:
                xs.append(g + (k - 0.5) * 0.4)
                ys.append(value)
                hatch.append(estimated)
        bars = ax.bar(xs, ys, width=0.4, label=kind)
        for b, est in zip(bars, hatch):
            if est:
                b.set_hatch("//")
                b.set_alpha(0.5)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{a}\n{d}" for a, d in groups], rotation=60, fontsize=7)
    ax.set_ylabel("speedup over unfused (cycles)")
    ax.set_title("fuseflow, FuseFlow Figure 12 study (hatched: cycle-model estimate, not simulated)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def _expected_rank(point: dict) -> int:
    """Which points to start first when several run at once: full fusion, then partial, then the rest."""
    return {"full": 0, "fuseflow": 1, "layer": 1}.get(point["schedule"], 2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tier", choices=list(TIERS), default="medium")
    ap.add_argument("--only", default="gcn,sage,sae,gpt", help="applications: gcn, sage, sae, gpt")
    ap.add_argument("--datasets", default="", help="comma list (default: the tier's)")
    ap.add_argument("--schedules", default="", help="comma list (default: unfused, partial, full)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per point")
    ap.add_argument(
        "--max-rss-gb",
        type=float,
        help="resident memory at which a point is stopped (default 8; 12 at the paper tier, whose "
        "SAE 1024x1024 and ogbn-mag points peak at 6-8.4 GB)",
    )
    ap.add_argument("--budget", type=float, help="estimated distinct ALU ops above which a point is not simulated")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes per point (simulate(jobs=))")
    ap.add_argument(
        "--points", type=int, default=1, help="points run at once, each in its own watched process (default 1)"
    )
    ap.add_argument("--memo-dir", default="", help="share memoised regions between points")
    ap.add_argument("--scratch", default=str(ROOT / "build" / "figure12"), help="per-point logs")
    ap.add_argument("-o", "--output", default="")
    ap.add_argument("--plot", default="")
    ap.add_argument("--point", default="", help=argparse.SUPPRESS)
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="combine earlier runs' rows (later files win)")
    args = ap.parse_args(argv)
    if args.max_rss_gb is None:
        args.max_rss_gb = 12.0 if args.tier == "paper" else 8.0
    if args.merge:
        rows = merge(args.merge)
        speedups(rows)
        doc = {"merged": args.merge, "rows": rows}
        if args.output:
            Path(args.output).write_text(json.dumps(doc, indent=1) + "\n")
        if args.plot:
            plot(rows, args.plot)
        print(table(rows))
        return 0
    if args.point:
        p = json.loads(args.point)
        run_point(p["app"], p["dataset"], p["schedule"], args.tier, args.memo_dir or None, args.jobs, args.budget)
        return 0
    wanted = set(args.datasets.split(",")) if args.datasets else None
    points = [
        {"app": app, "dataset": ds, "schedule": s}
        for app in args.only.split(",")
        for ds in TIERS[args.tier][app]
        if wanted is None or ds in wanted
        for s in (args.schedules or SCHEDULES[app]).split(",")
    ]
    rows, start = [], time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=max(1, args.points))  # each thread watches one child process
    # longest first (fused GNN regions recompute: full fusion runs longest, then partial), so that
    # the last point to start is a short one; rows keep the points' order
    started = {id(p): pool.submit(measure, p, args) for p in sorted(points, key=_expected_rank)}
    running = [started[id(p)] for p in points]
    for i, (p, fut) in enumerate(zip(points, running), 1):
        row = fut.result()
        rows.append(row)
        print(
            f"[{i}/{len(points)}] {p['app']} {p['dataset']} {p['schedule']}: {row.get('cycles', '—')} cycles, "
            f"{row['wall_s']} s, {row['peak_rss_gb']} GB, {row['status']}",
            file=sys.stderr,
            flush=True,
        )
    pool.shutdown()
    speedups(rows)
    total = round(time.perf_counter() - start, 1)
    doc = {"tier": args.tier, "wall_s_total": total, "timeout_s": args.timeout, "max_rss_gb": args.max_rss_gb}
    doc["rows"] = rows
    if args.output:
        Path(args.output).write_text(json.dumps(doc, indent=1) + "\n")
    if args.plot:
        plot(rows, args.plot)
    print(json.dumps({"tier": args.tier, "points": len(rows), "wall_s_total": total}))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
