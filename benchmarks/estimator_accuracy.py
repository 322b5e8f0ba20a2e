"""How close the cycle model comes to the simulator, and how much faster it is.

For every example x schedule x dataflow order the repo simulates (plus random chains), compile,
simulate, estimate, and compare region by region: |estimate - simulated| / simulated cycles, the
Spearman rank correlation of total cycles among each model's configurations, and the wall time
of `simulate()` over `estimate()`. Prints one JSON line per configuration, then a summary table.

    python benchmarks/estimator_accuracy.py -o docs/results/estimator_accuracy.json \
        [--plot docs/results/estimator_error.png]
    python benchmarks/estimator_accuracy.py --quick        # the small cases only (~1 min)
    python benchmarks/estimator_accuracy.py --quick --random 4 --arch rda --capture build/rda.pkl
    python benchmarks/estimator_accuracy.py --quick --random 4 --arch rda --fifo-depth 64   # deeper FIFOs

`--capture` pickles every simulated region's graph spec, input statistics, timing and simulated
cycles, so that a variant of the cycle model re-scores against all of them in seconds
(`benchmarks/model_variants.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
os.environ.setdefault("TMPDIR", str(ROOT / "build" / "tmp"))
os.makedirs(os.environ["TMPDIR"], exist_ok=True)

import torch  # noqa: E402

import fuseflow  # noqa: E402
from fuseflow.model_files import example  # noqa: E402


def _cases(quick: bool):
    """(model name, build module, options, schedules, sweep every order of a one-region schedule)."""
    gcn = example("gcn", EXAMPLES)
    gcn_layer = example("gcn_layer", EXAMPLES)
    gpt_bigbird = example("gpt_bigbird", EXAMPLES)
    graphsage = example("graphsage", EXAMPLES)
    kernels = example("kernels", EXAMPLES)
    sae = example("sae", EXAMPLES)
    spgemm_chain = example("spgemm_chain", EXAMPLES)

    small_gpt = dict(seq=64, d_model=32, heads=2, d_ff=64, block=16)
    out = [
        ("spmv", kernels, dict(kernel="spmv"), ["full"], True),
        ("spmm", kernels, dict(kernel="spmm"), ["full"], True),
        ("sddmm-csr", kernels, dict(kernel="sddmm"), ["full"], True),
        ("sddmm-csc", kernels, dict(kernel="sddmm", orientation="csc"), ["full"], True),
        ("masked-softmax", kernels, dict(kernel="masked", n=64), ["full", "unfused"], True),
        ("spgemm-chain-d0.1", spgemm_chain, dict(density=0.1), ["full", "unfused"], True),
        ("spgemm-chain-d0.3", spgemm_chain, dict(density=0.3), ["full"], True),
        ("gcn-layer", gcn_layer, {}, ["unfused", "full"], True),
        ("gcn", gcn, {}, ["unfused", "layer", "full"], False),
        ("graphsage", graphsage, {}, ["unfused", "layer", "full"], False),
        ("sae", sae, {} if not quick else dict(batch=8, n_in=128, n_hidden=32), ["unfused", "layer", "full"], False),
    ]
    try:
        pyg_gnn = example("pyg_gnn", EXAMPLES)
        import torch_geometric  # noqa: F401
    except ImportError:  # the pyg extra is optional
        pyg_gnn = None
    if pyg_gnn is not None:
        for conv in ("gcn", "sage", "sage-max", "gin"):
            out.append((f"pyg-{conv}", pyg_gnn, dict(conv=conv), ["unfused", "layer", "full", "op"], False))
    if not quick:
        out.append(("gpt-bigbird-seq64", gpt_bigbird, small_gpt, ["unfused", "fuseflow"], False))
        out.append(("gpt-bigbird-seq256", gpt_bigbird, {}, ["unfused", "fuseflow"], False))  # the largest: speed
        cora = Path(ROOT.parent / "shared" / "data" / "planetoid" / "cora.npz")
        if cora.exists():
            out.append(("gcn-cora", gcn, dict(graph=str(cora)), ["unfused", "layer", "full"], False))
            out.append(("graphsage-cora", graphsage, dict(graph=str(cora)), ["unfused", "layer", "full"], False))
    return out


def _schedule(mod, name: str, base):
    if name in ("unfused", "layer", "full", "op"):
        return name
    return dict(mod.schedules(base.op_infos))[name]


def _random_chains(n: int, seed: int = 0):
    """Random 2-3 op chains over random sparse/dense operands (tests/e2e/test_random_chains.py's kind)."""
    rng = np.random.default_rng(seed)

    from fuseflow.models import Chain  # the same chain module the random-chain tests compile

    for i in range(n):
        ops = list(rng.choice(["matmul", "mul", "add", "relu", "scale"], size=int(rng.integers(2, 4))))
        if "matmul" not in ops:
            ops[0] = "matmul"
        a, b = int(rng.integers(16, 64)), int(rng.integers(16, 64))
        x = torch.from_numpy(
            (rng.random((a, b)) * (rng.random((a, b)) < rng.choice([0.05, 0.2, 1.0]))).astype(np.float32)
        )
        ws, fmts, cols = [], {"x": rng.choice(["csr", "dcsr", "csc", "dense"])}, b
        for op in ops:
            if op == "matmul":
                nxt = int(rng.integers(8, 48))
                shape = (cols, nxt)
                cols = nxt
            elif op in ("mul", "add"):
                shape = (a, cols)
            else:
                continue
            dens = rng.choice([0.1, 0.3, 1.0])
            ws.append(torch.from_numpy((rng.random(shape) * (rng.random(shape) < dens)).astype(np.float32)))
            fmts[f"arg{len(ws)}"] = rng.choice(["csr", "dense"]) if dens < 1 else "dense"
        yield f"random-{i}", Chain(ops).eval(), (x, *ws), fmts


def _measure(prog, arch: Any, captured: list | None = None) -> dict:
    t0 = time.perf_counter()
    res = prog.simulate(arch=arch)
    t_sim = time.perf_counter() - t0
    err = res.check()
    inputs: dict[str, tuple] = {}
    t0 = time.perf_counter()
    with _capturing(inputs if captured is not None else None):
        est = prog.estimate(arch=arch)
    t_est = time.perf_counter() - t0
    regions = []
    for r, e in zip(res.regions, est.regions):
        if r.engine == "model":
            continue  # a re-layout region is modelled in both
        if captured is not None and r.name in inputs:
            captured.append({"region": r.name, "cycles": r.cycles, "inputs": inputs[r.name]})
        regions.append(
            {
                "region": r.name,
                "cycles": r.cycles,
                "estimate": round(e.cycles),
                "rel_error": (e.cycles - r.cycles) / max(r.cycles, 1),
            }
        )
    return {
        "cycles": res.cycles,
        "estimate": est.cycles,
        "sim_s": round(t_sim, 4),
        "est_s": round(t_est, 5),
        "max_abs_error": err,
        "regions": regions,
    }


@contextlib.contextmanager
def _capturing(into: dict | None):
    """Record `estimate_graph`'s arguments per graph name while `Program.estimate` runs (it calls
    the function its own module imported, so that module attribute is the one replaced)."""
    if into is None:
        yield
        return
    from fuseflow import program

    real = program.estimate_graph

    def recording(spec, stats, timing, **kw):
        into[spec.name] = (spec, dict(stats), timing)
        return real(spec, stats, timing, **kw)

    program.estimate_graph = recording
    try:
        yield
    finally:
        program.estimate_graph = real


APART = 1.05
"""Configurations whose simulated cycles differ by at least this factor are a pair the model
must order; closer ones are near-ties, which move Spearman without changing a choice much."""


def _ordered_apart(rows: list[dict]) -> list[int]:
    """[pairs the model orders as the simulator does, pairs] among configurations at least
    `APART` apart in simulated cycles."""
    right = total = 0
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            if max(a["cycles"], b["cycles"]) < APART * min(a["cycles"], b["cycles"]):
                continue
            total += 1
            right += (a["cycles"] - b["cycles"]) * (a["estimate"] - b["estimate"]) > 0
    return [right, total]


def _spearman(xs, ys) -> float:
    """Spearman's rank correlation, tied values given their average rank (configurations of one
    dataflow tie in the model, and within a few cycles in the simulator)."""
    if len(xs) < 3:
        return float("nan")
    from scipy.stats import spearmanr

    return float(spearmanr(xs, ys).statistic)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small cases only")
    ap.add_argument("--arch", default="comal", help="preset or TOML (the model reads the same parameters)")
    ap.add_argument(
        "--fifo-depth", type=int, help="the FIFO depth, in place of the preset's (a finite-FIFO sweep: rda at 8-64)"
    )
    ap.add_argument("--random", type=int, default=12, help="random chains")
    ap.add_argument("-o", "--output", help="write the JSON here")
    ap.add_argument("--plot", help="write a histogram of region errors (PNG/SVG, needs matplotlib)")
    ap.add_argument("--capture", help="pickle each region's model inputs and simulated cycles here")
    a = ap.parse_args()
    if a.fifo_depth and a.arch.endswith(".toml"):
        ap.error("--fifo-depth overrides a preset's depth; set fifo_depth in the TOML instead")
    arch: Any = {"preset": a.arch, "fifo_depth": a.fifo_depth} if a.fifo_depth else a.arch
    rows = []
    captured: list[dict] | None = [] if a.capture else None

    def record(model: str, schedule: str, order: str, prog) -> None:
        try:
            m = _measure(prog, arch, captured)
        except fuseflow.FuseflowError as e:
            print(json.dumps({"model": model, "schedule": schedule, "order": order, "skipped": str(e)}), flush=True)
            return
        rows.append({"model": model, "schedule": schedule, "order": order, **m})
        if captured is not None:
            for c in captured:
                c.setdefault("config", (model, schedule, order))
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "regions"}), flush=True)

    for name, mod, opts, schedules, sweep in _cases(a.quick):
        model, args, formats = mod.build(**opts)
        base = fuseflow.compile(model, args, formats=formats, schedule="unfused", order="plain", arch=arch)
        for sched_name in schedules:
            sched = _schedule(mod, sched_name, base)
            for order in ("plain", "auto"):
                prog = fuseflow.compile(model, args, formats=formats, schedule=sched, order=order, arch=arch)
                record(name, sched_name, order, prog)
                if sweep and order == "auto" and len(prog.graphs) == 1:
                    region = prog.graphs[0].name
                    for c in prog.order_candidates.get(region, ()):
                        record(name, sched_name, c.name, prog.reorder({region: c.name}))
    for name, model, args, formats in _random_chains(a.random):
        for schedule, order in (("full", "auto"), ("full", "plain"), ("unfused", "plain")):
            try:
                prog = fuseflow.compile(model, args, formats=formats, schedule=schedule, order=order, arch=arch)
            except fuseflow.FuseflowError as e:
                print(json.dumps({"model": name, "schedule": schedule, "skipped": str(e)}), flush=True)
                continue
            record(name, schedule, order, prog)

    errs = np.array([abs(r["rel_error"]) for row in rows for r in row["regions"]])
    by_model: dict[str, list] = {}
    for row in rows:
        by_model.setdefault(row["model"], []).append(row)
    rank = {m: _spearman([r["cycles"] for r in rs], [r["estimate"] for r in rs]) for m, rs in by_model.items()}
    largest = max(rows, key=lambda r: r["cycles"])
    summary = {
        "arch": a.arch + (f", fifo_depth {a.fifo_depth}" if a.fifo_depth else ""),
        "configurations": len(rows),
        "regions": int(errs.size),
        "median_abs_error": float(np.median(errs)),
        "p90_abs_error": float(np.percentile(errs, 90)),
        "max_abs_error": float(errs.max()),
        "worst_program": max(
            (
                {
                    "model": r["model"],
                    "schedule": r["schedule"],
                    "order": r["order"],
                    "ratio": r["cycles"] / r["estimate"],
                }
                for r in rows
            ),
            key=lambda x: max(x["ratio"], 1 / max(x["ratio"], 1e-9)),
        ),
        "spearman_per_model": {m: round(v, 4) for m, v in rank.items() if not np.isnan(v)},
        "ordered_apart_per_model": {m: _ordered_apart(rs) for m, rs in by_model.items()},
        "largest_case": {
            "model": largest["model"],
            "schedule": largest["schedule"],
            "order": largest["order"],
            "cycles": largest["cycles"],
            "sim_s": largest["sim_s"],
            "est_s": largest["est_s"],
            "speedup": round(largest["sim_s"] / max(largest["est_s"], 1e-9), 1),
        },
    }
    summary["order_choice"] = _order_choice(rows)
    out = {"summary": summary, "rows": rows}
    if a.capture:
        if not captured:
            sys.exit("estimator_accuracy: --capture recorded no region (is program.estimate_graph still called?)")
        with open(a.capture, "wb") as f:
            pickle.dump({"arch": arch, "regions": captured, "rows": rows}, f)
    if a.output:
        Path(a.output).write_text(json.dumps(out, indent=1))
    print(json.dumps(summary, indent=2))
    _table(summary, by_model, rank)
    if a.plot:
        _plot(errs, a.plot)


def _order_choice(rows: list[dict]) -> list[dict]:
    """Per swept (model, schedule): the simulated cycles of auto's choice, of plain, and of the best
    enumerated order (re-layout conversions of model inputs included in all three)."""
    out = []
    for model, sched in dict.fromkeys((r["model"], r["schedule"]) for r in rows):
        rs = [r for r in rows if r["model"] == model and r["schedule"] == sched]
        swept = [r for r in rs if r["order"] not in ("plain", "auto")]
        auto = next((r for r in rs if r["order"] == "auto"), None)
        plain = next((r for r in rs if r["order"] == "plain"), None)
        if len(swept) < 2 or auto is None or plain is None:
            continue
        best = min(swept, key=lambda r: r["cycles"])
        out.append(
            {
                "model": model,
                "schedule": sched,
                "orders": len(swept),
                "auto": auto["cycles"],
                "plain": plain["cycles"],
                "best": best["cycles"],
                "best_order": best["order"],
                "auto_over_best": round(auto["cycles"] / best["cycles"], 3),
                "plain_over_best": round(plain["cycles"] / best["cycles"], 3),
            }
        )
    return out


def _table(summary: dict, by_model: dict, rank: dict) -> None:
    print(
        "\n| model | configurations | regions | median abs error | p90 abs error | Spearman "
        f"| pairs >= {APART:g}x apart ordered right |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for m, rs in by_model.items():
        e = np.array([abs(r["rel_error"]) for row in rs for r in row["regions"]])
        sp = rank[m]
        right, pairs = summary["ordered_apart_per_model"][m]
        print(
            f"| {m} | {len(rs)} | {e.size} | {100 * np.median(e):.1f}% | {100 * np.percentile(e, 90):.1f}% | "
            f"{'-' if np.isnan(sp) else f'{sp:.3f}'} | {right} / {pairs} |"
        )
    print(
        f"| **all** | {summary['configurations']} | {summary['regions']} | "
        f"{100 * summary['median_abs_error']:.1f}% | {100 * summary['p90_abs_error']:.1f}% | |"
    )
    print(
        "\n| kernel | schedule | orders | auto (chosen) | plain (default before) | best | best order "
        "| auto / best | plain / best |"
    )
    print("|---|---|---:|---:|---:|---:|---|---:|---:|")
    for c in summary["order_choice"]:
        print(
            f"| {c['model']} | {c['schedule']} | {c['orders']} | {c['auto']:,} | {c['plain']:,} | {c['best']:,} | "
            f"{c['best_order']} | {c['auto_over_best']:.2f} | {c['plain_over_best']:.2f} |"
        )
    lc = summary["largest_case"]
    print(
        f"\nlargest case {lc['model']} {lc['schedule']} {lc['order']}: {lc['cycles']:,} cycles, simulate "
        f"{lc['sim_s']:.3f} s, estimate {lc['est_s']:.4f} s ({lc['speedup']}x)"
    )


def _plot(errs: np.ndarray, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.hist(100 * errs, bins=np.arange(0, max(30, 100 * errs.max()) + 2.5, 2.5), color="#4477aa")
    ax.set_xlabel("|estimated - simulated| / simulated cycles per region (%)")
    ax.set_ylabel("regions")
    ax.set_title(f"cycle model vs simulator ({errs.size} regions)")
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    main()
