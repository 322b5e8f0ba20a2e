"""FuseFlow's figures, ours beside the paper's: one JSON, one Markdown page, one plot per figure.

    python benchmarks/paper.py --figure all --tier quick -o docs/results/paper_quick.json \\
        --md docs/paper.md --plots docs/results/paper --jobs 2

Points (each Figure 12 application and dataset, each other figure) run on the `fuseflow dse`
executors: `--jobs N` worker processes, or `--executor ray [--address ...]`. A long tier is run
in parts: `--only` picks Figure 12 points, and `--reuse SAVED.json -o SAVED.json` extends a saved
run (the Figure 12 schedules it simulated are not run again; its rows of the points run now are
replaced, and its `runs` list this command).

Figures (the paper's numbers: `benchmarks/paper/numbers.json`, from the artifact's plotting
defaults, with their source):
- 12: speedup of partial (`layer`) and full fusion for GCN, GraphSAGE and SAE over the paper's
  baseline, one kernel per linalg op (our `op` schedule), and over our `unfused` (one region per
  PyTorch op) as extra rows; ablations for the differences (a final softmax, the memory model,
  dense features, SAE's dataflow).
- 14: GCN FLOPs and memory traffic, normalised to unfused, for full fusion, only layer 1 fused,
  only layer 2 fused, both layers (partial) and unfused.
- 15a: lanes (P) on the fused masked attention, speedup over one lane against ideal scaling.
- 15b: which level the lanes split: P lanes at each index variable of the fused attention
  (query rows i, keys k, output features j, the Q.K reduction l), speedup over one lane.
- 16: blocked vs unstructured masked attention for mask blocks b = 16, 32, 64.
- 17: every dataflow order of the fused chain X = A @ B @ C on the karate club at 90% sparsity,
  as speedup over the worst order.
Figures 15a, 15b, 16 and 17 have no paper numbers: the artifact has no default data for them.

Each row: `figure`, `app`, `dataset`, `config`, `ours`, `paper` (None where the paper gives
none), `ratio` (ours / paper), `source` (simulated: every output checked against PyTorch), and
a `note`. Tiers: `smoke` (the smallest point of each figure: what the test runs), `quick`
(Cora and the Cora-ML and DBLP stand-ins; a few minutes), `medium` (adds ogbl-collab), `paper`
(the paper's sizes: ogbn-mag, SAE up to 1024x1024, GPT-3 Small, attention at seq 1024; the
figures' own points without the ablations, a cycle limit of 10^12; hours of one core). Graphs
other than Cora come from ../shared/data or are seeded stand-ins (examples/graphs.py). The JSON
records the wall time and the peak resident memory of the run's processes.
"""

from __future__ import annotations

import argparse
import hashlib
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
from fuseflow.model_files import example, python_file  # noqa: E402

PAPER = json.loads((ROOT / "benchmarks" / "paper" / "numbers.json").read_text())
FIGURES = ("12", "14", "15a", "15b", "16", "17")
PLANETOID = ROOT.parent / "shared" / "data" / "planetoid"

# our dataset -> the paper's name for it (Figure 12 and 14 data keys)
GRAPH_NAMES = {"cora": "cora", "cora-ml": "cora_ml", "dblp": "dblp", "ogbl-collab": "collab", "ogbn-mag": "mag"}
SAE_NAMES = {"224x224": "ImageNet", "512x512": "LUNA16", "1024x1024": "NIH-CXR"}
TIERS: dict[str, dict] = {
    "smoke": {
        "12": [("gcn", "karate")],
        "14": ["karate"],
        "15a": {"seq": 32, "d": 8, "block": 16, "lanes": [1, 2]},
        "15b": {"seq": 32, "d": 8, "block": 16, "lanes": 4, "levels": ["i", "k"]},
        "16": {"seq": 32, "d": 16, "blocks": [16]},
        "17": [0.1],
    },
    "quick": {
        "12": [(a, d) for a in ("gcn", "sage") for d in ("cora", "cora-ml", "dblp")]
        + [("sae", "224x224"), ("gpt", "block16"), ("gat", "cora")],
        "14": ["cora-ml", "dblp"],
        "15a": {"seq": 128, "d": 32, "block": 16, "lanes": [1, 2, 4, 8, 16]},
        "15b": {"seq": 128, "d": 32, "block": 16, "lanes": 8, "levels": ["i", "k", "j", "l"]},
        "16": {"seq": 128, "d": 64, "blocks": [16, 32, 64]},
        "17": [0.1],
    },
    "medium": {
        "12": [(a, d) for a in ("gcn", "sage") for d in ("cora", "cora-ml", "dblp", "ogbl-collab")]
        + [("sae", "224x224"), ("sae", "512x512"), ("gpt", "block16"), ("gpt", "block32"), ("gat", "cora")],
        "14": ["cora-ml", "dblp", "ogbl-collab"],
        "15a": {"seq": 256, "d": 64, "block": 16, "lanes": [1, 2, 4, 8, 16, 32, 64]},
        "15b": {"seq": 256, "d": 64, "block": 16, "lanes": 16, "levels": ["i", "k", "j", "l"]},
        "16": {"seq": 256, "d": 64, "blocks": [16, 32, 64]},
        "17": [0.1],
    },
    "paper": {  # the paper's sizes: hours of one core (ogbn-mag, SAE 1024x1024, GPT-3 Small)
        "12": [(a, d) for a in ("gcn", "sage") for d in ("cora", "cora-ml", "dblp", "ogbl-collab", "ogbn-mag")]
        + [("sae", s) for s in ("224x224", "512x512", "1024x1024")]
        + [("gpt", b) for b in ("block16", "block32", "block64")]
        + [("gat", "cora")],
        "14": ["cora-ml", "dblp", "ogbl-collab"],
        "15a": {"seq": 1024, "d": 64, "block": 16, "lanes": [1, 2, 4, 8, 16, 32, 64]},
        "15b": {"seq": 1024, "d": 64, "block": 16, "lanes": 16, "levels": ["i", "k", "j", "l"]},
        "16": {"seq": 1024, "d": 64, "blocks": [16, 32, 64]},
        "17": [0.1],
    },
}
ABLATING = ("quick", "medium")
"""Tiers that add the ablation rows (the paper tier measures the figures' own points only)."""
PAPER_ARCH = {"max_cycles": 10**12, "max_fifo_mib": 16384}
"""The paper tier's machine: the default one with a cycle limit past its largest points
(SAE 1024x1024 full fusion ~1.75e9 cycles, GPT-3 Small's regions 10^9-10^10) and room for 16 GiB
of queued tokens. GPT-3 Small's cross-block region queues its FFN's bias and residual streams a
whole matrix ahead of the matmuls they meet (256-512 MiB at seq 256 and d_model 128, growing
about with seq x d_model) and passes even that at seq 1024, d_model 768."""


GPT_GEOMETRY = {"seq": 64, "d_model": 32, "heads": 2, "d_ff": 128, "layers": 2}
"""GPT-BigBird for Figure 12: GPT-3 Small's structure (pre-LN decoders, BigBird attention per
head) at a size whose fully fused point compiles and simulates in under a minute."""
GPT_NODE_BUDGET = 1_000_000
GPT3_SMALL = {"seq": 1024, "d_model": 768, "heads": 12, "d_ff": 3072, "layers": 12}
"""GPT-3 Small itself (the paper tier's GPT)."""


def gpt_geometry(tier: str) -> dict:
    """The decoder stack Figure 12 runs at `tier`."""
    return GPT3_SMALL if tier == "paper" else GPT_GEOMETRY


def _arch(tier: str) -> dict | None:
    return PAPER_ARCH if tier == "paper" else None


def _graph(dataset: str) -> str | None:
    if dataset == "karate":
        return None
    if dataset == "cora":
        path = PLANETOID / "cora.npz"
        if not path.exists():
            raise FileNotFoundError(f"{path} (../shared/data) is not here")
        return str(path)
    return f"standin:{dataset}"


def _build(app: str, dataset: str, **options):
    if app in ("gcn", "sage"):
        mod = example("gcn" if app == "gcn" else "graphsage", EXAMPLES)
        return mod.build(graph=_graph(dataset), max_features=None, **options)
    sae = example("sae", EXAMPLES)

    sizes = {"tiny": (256, 64), "224x224": (50_176, 256), "512x512": (262_144, 512), "1024x1024": (1_048_576, 512)}
    n_in, hidden = sizes[dataset]
    # 1024x1024: dense 1M x 512 weights pass 8 GB before pruning; torch sparse parameters do not
    sparse = n_in >= 1_048_576
    return sae.build(batch=32, n_in=n_in, n_hidden=hidden, weight_sparsity=0.9, sparse_weights=sparse)


SAMPLE_ENV = "FUSEFLOW_PAPER_SAMPLE"
"""`--sample`'s target, in the environment so that worker processes see it too."""


def _run(model, args, formats, schedule, arch=None, order=None) -> dict:
    """One simulated point, measured as every sweep measures it (`fuseflow.experiments.point`);
    sampled (docs/sampling.md) under `--sample`, its interval then kept."""
    from fuseflow.experiments.point import measure

    sample = os.environ.get(SAMPLE_ENV) or None
    got = measure((model, args, formats), schedule=schedule, arch=arch, order=order, sample=sample)
    if got["status"] != "ok":
        raise fuseflow.FuseflowError(got["status"].removeprefix("failed: "))
    out = {
        "cycles": got["cycles"],
        "alu_ops": got["alu_ops"],
        "mem_bytes": got["mem_read_bytes"] + got["mem_write_bytes"],
        "regions": got["regions"],
        "max_abs_error": got["max_abs_error"],
    }
    if got.get("sampled") and got["sampled"]["units"]:
        out["interval"] = got["interval"]
    return out


SKIPPED = "not run (--skip)"
"""The reason `_runs` records for a schedule the command line skipped."""
SKIPPABLE = ("op", "unfused", "layer", "partial", "full")
"""Figure 12's schedule names (`layer` for GCN, GraphSAGE and SAE; `partial` for GPT)."""


def _runs(model, args, formats, schedules: dict, arch=None, run=None, reused=None, skip=()) -> tuple[dict, dict]:
    """`_run` of each named schedule; a schedule refused or stopped at this size (the cycle limit,
    a fused expression too large) is recorded in the second dict with its reason's first line,
    so that its rows say why instead of the whole run stopping. A schedule in `reused` (cycles
    a saved run simulated, `--reuse`) is taken from there; one in `skip` is recorded as `SKIPPED`."""
    runs, failed = {}, {}
    for k, s in schedules.items():
        if reused and k in reused:
            runs[k] = reused[k]
            continue
        if k in skip:
            failed[k] = SKIPPED
            continue
        try:
            runs[k] = (run or _run)(model, args, formats, s, arch)
        except fuseflow.FuseflowError as e:
            failed[k] = str(e).splitlines()[0]
    return runs, failed


def _failure(failed: dict, *names: str) -> tuple[str, str] | None:
    """A row over these runs without a value: its source (`skipped` or `failed`, as the first
    run without cycles) and why, or None."""
    for k in names:
        if failed.get(k) == SKIPPED:
            return "skipped", f"{k} {SKIPPED}"
        if k in failed:
            return "failed", f"{k} failed: {failed[k]}"
    return None


def _row(figure, app, dataset, config, ours, paper, source="simulated", note="", **extra) -> dict:
    ratio = ours / paper if (paper and ours is not None) else None
    return {
        "figure": figure,
        "app": app,
        "dataset": dataset,
        "config": config,
        "ours": ours,
        "paper": paper,
        "ratio": ratio,
        "source": source,
        "note": note,
        **extra,
    }


def figure12(tier: str, say) -> list[dict]:
    rows = []
    for k in range(len(TIERS[tier]["12"])):
        rows += figure12_point(tier, k, say)
    return rows


def figure12_point(tier: str, k: int, say, reused: dict | None = None, skip: tuple[str, ...] = ()) -> list[dict]:
    """The rows of the tier's k-th Figure 12 point (an application on a dataset); schedules in
    `reused` (`_reused`) are not run again, those in `skip` not at all."""
    app, dataset = TIERS[tier]["12"][k]
    say(f"figure 12: {app} {dataset}")
    if app == "gpt":
        return _gpt_rows(dataset, tier, reused, skip)
    if app == "gat":
        return _gat_rows(dataset, tier, reused, skip)
    try:
        model, args, formats = _build(app, dataset)
    except FileNotFoundError as e:
        return [_row("12", app, dataset, "-", None, None, "skipped", str(e))]
    schedules = {s: s for s in ("unfused", "op", "layer", "full")}
    runs, failed = _runs(model, args, formats, schedules, _arch(tier), reused=reused, skip=skip)
    rows: list[dict] = []
    key = "graphsage" if app == "sage" else app
    name = (SAE_NAMES if app == "sae" else GRAPH_NAMES).get(dataset)
    paper = PAPER["figure12"][key]
    at = paper["datasets"].index(name) if name in paper["datasets"] else None

    def paper_speedup(config: str, at=at, paper=paper) -> float | None:
        return None if at is None else paper["unfused"][at] / paper[config][at]

    cycles = {k: v["cycles"] for k, v in runs.items()}
    intervals = {k: v["interval"] for k, v in runs.items() if v.get("interval")}
    error = max((v["max_abs_error"] for v in runs.values() if v["max_abs_error"] is not None), default=None)
    for base_name, why in (
        ("op", "over `op`: one region per linalg op, the paper's baseline (a kernel per op)"),
        ("unfused", "over `unfused`: one region per PyTorch op (our coarser baseline)"),
    ):
        for config, ours_name in (("partial", "layer"), ("full", "full")):
            stopped = _failure(failed, base_name, ours_name)
            if stopped is not None:
                rows.append(
                    _row("12", app, dataset, f"{config} over {base_name}", None, paper_speedup(config), *stopped)
                )
                continue
            rows.append(
                _row(
                    "12",
                    app,
                    dataset,
                    f"{config} over {base_name}",
                    runs[base_name]["cycles"] / runs[ours_name]["cycles"],
                    paper_speedup(config),
                    note=f"ours: `{ours_name}` {why}",
                    cycles=cycles,
                    max_abs_error=error,
                    **({"intervals": sampled} if (sampled := _sampled_of(intervals, base_name, ours_name)) else {}),
                )
            )
    _mark_reused(rows, runs)
    if app == "sae" and tier in ABLATING:
        rows += _sae_dataflows(paper_speedup("full"))
    if app == "gcn" and dataset == TIERS[tier]["12"][0][1] and tier in ABLATING:  # the other causes, once
        rows += _gcn_ablations(app, dataset, model, args, formats, paper_speedup("partial"))
    if app == "gcn" and tier in ABLATING:
        rows += _gcn_features_first(dataset, paper_speedup("partial"), paper_speedup("full"))
    if app in ("gcn", "sage") and tier != "paper":  # the paper's GNNs end in a softmax over the classes
        model, args, formats = _build(app, dataset, softmax=True)
        soft = {s: _run(model, args, formats, s) for s in ("unfused", "op", "layer")}
        for base_name in ("unfused", "op"):
            rows.append(
                _row(
                    "12",
                    app,
                    dataset,
                    f"partial over {base_name}, with softmax",
                    soft[base_name]["cycles"] / soft["layer"]["cycles"],
                    paper_speedup("partial"),
                    note="ablation, model: the model ends in a softmax, as the paper's",
                    cycles={k: v["cycles"] for k, v in soft.items()},
                    max_abs_error=max(v["max_abs_error"] for v in soft.values()),
                )
            )
    return rows


BEYOND = "beyond the paper: FuseFlow has no graph attention"
"""The note of rows measuring a model the paper does not."""


def _gat_rows(dataset: str, tier: str, reused: dict | None = None, skip: tuple[str, ...] = ()) -> list[dict]:
    """A two-layer GAT (`examples/gat.py`: 8 heads, then 1) under Figure 12's schedules: a row
    beyond the paper, with no paper figure beside it."""
    gat = example("gat", EXAMPLES)

    try:
        model, args, formats = gat.build(graph=_graph(dataset), features=64)
    except FileNotFoundError as e:
        return [_row("12", "gat", dataset, "-", None, None, "skipped", str(e))]
    schedules = {s: s for s in ("unfused", "op", "layer", "full")}
    runs, failed = _runs(model, args, formats, schedules, _arch(tier), reused=reused, skip=skip)
    rows: list[dict] = []
    for base in ("op", "unfused"):
        for config, ours in (("partial", "layer"), ("full", "full")):
            stopped = _failure(failed, base, ours)
            if stopped is not None:
                rows.append(_row("12", "gat", dataset, f"{config} over {base}", None, None, *stopped))
                continue
            rows.append(
                _row(
                    "12",
                    "gat",
                    dataset,
                    f"{config} over {base}",
                    runs[base]["cycles"] / runs[ours]["cycles"],
                    None,
                    note=f"{BEYOND}; ours: `{ours}` over `{base}`",
                    cycles={k: v["cycles"] for k, v in runs.items()},
                    max_abs_error=max(
                        (v["max_abs_error"] for v in runs.values() if v["max_abs_error"] is not None), default=None
                    ),
                )
            )
    _mark_reused(rows, runs)
    return rows


def _gpt_rows(dataset: str, tier: str, reused: dict | None = None, skip: tuple[str, ...] = ()) -> list[dict]:
    """GPT under the paper's two schedules: partial, FuseFlow's split per block (LN + QKV | MHA
    | the rest), and full, its cross-block schedule (the rest of block d fused with the LN + QKV
    of block d + 1), over `op` (the paper's baseline) and `unfused`."""
    gpt_bigbird = example("gpt_bigbird", EXAMPLES)

    block = int(dataset.removeprefix("block"))
    geo = {**gpt_geometry(tier), "block": block}
    model, args, formats = gpt_bigbird.build(**geo)
    schedules = {
        "op": "op",
        "unfused": "unfused",
        "partial": gpt_bigbird.transformer_schedule(),
        "full": gpt_bigbird.fuseflow_full_schedule(geo["layers"]),
    }
    runs, failed = _runs(model, args, formats, schedules, _arch(tier), run=_run_gpt, reused=reused, skip=skip)
    paper = PAPER["figure12"]["gpt3"]
    at = paper["datasets"].index(dataset)
    cycles = {k: v["cycles"] for k, v in runs.items()}
    size = f"{geo['layers']} decoders, seq {geo['seq']}, d_model {geo['d_model']} (the paper: GPT-3 Small)"
    rows = []
    for base in ("op", "unfused"):
        for config in ("partial", "full"):
            theirs = paper["unfused"][at] / paper[config][at]
            stopped = _failure(failed, base, config)
            if stopped is not None:
                rows.append(_row("12", "gpt", dataset, f"{config} over {base}", None, theirs, *stopped))
                continue
            rows.append(
                _row(
                    "12",
                    "gpt",
                    dataset,
                    f"{config} over {base}",
                    runs[base]["cycles"] / runs[config]["cycles"],
                    theirs,
                    note=f"ours at {size}; the speedup is compared, not the cycles",
                    cycles=cycles,
                    max_abs_error=max(runs[k]["max_abs_error"] or 0.0 for k in (base, config)),
                )
            )
    return _mark_reused(rows, runs)


def _sampled_of(intervals: dict, *schedules: str) -> dict:
    """The intervals of the schedules a row compares that were sampled (none: the row is exact)."""
    return {s: intervals[s] for s in schedules if s in intervals}


def _mark_reused(rows: list[dict], runs: dict) -> list[dict]:
    """`rows`, each note naming the schedules whose cycles a saved run gave (`--reuse`)."""
    names = [k for k, v in runs.items() if v.get("reused")]
    for r in rows:
        if names and r["source"] == "simulated":
            r["note"] += f"; {', '.join(names)}: cycles from the saved run (--reuse), not simulated again"
    return rows


CHECKPOINT_ENV = "FUSEFLOW_PAPER_CHECKPOINT"
"""`--checkpoint DIR[@EVERY]`, in the environment so that worker processes see it too."""
SPILL_ENV = "FUSEFLOW_PAPER_SPILL"
"""`--spill N`: the architecture's `spill_tokens` for GPT's runs."""


def _exact_options(model, args, schedule, arch) -> tuple[dict | None, dict]:
    """GPT's arch with `--spill`, and `simulate`'s checkpoint keywords under `--checkpoint`: one
    directory per point and schedule (named by a digest of both), states every EVERY (10m)."""
    spill = os.environ.get(SPILL_ENV)
    if spill:
        arch = {**(arch or {}), "spill_tokens": int(spill)}
    where = os.environ.get(CHECKPOINT_ENV)
    if not where:
        return arch, {}
    root, _, every = where.partition("@")
    shapes = [tuple(getattr(a, "shape", ())) for a in args]
    name = hashlib.sha256(repr((type(model).__name__, shapes, schedule)).encode()).hexdigest()[:16]
    return arch, {"checkpoint": str(Path(root) / f"gpt-{name}"), "every": every or "10m"}


def _run_gpt(model, args, formats, schedule, arch=None) -> dict:
    """`_run` with GPT's tolerance (its reductions run over 64 elements and more). Identical
    decoders and heads are simulated once (the region memo: same cycles, values evaluated).
    The cross-block region of GPT-3 Small's full schedule lowers to ~125,000 sam nodes (the
    LN + QKV of the next block reads the whole FFN for each of its 36 projections): the node
    budget is raised past it. Under `--checkpoint` a stopped run continues where it was
    (each simulated part of a region kept, states saved inside a part: docs/pieces.md)."""
    prog = fuseflow.compile(model, args, formats=formats, schedule=schedule, node_budget=GPT_NODE_BUDGET)
    arch, exact = _exact_options(model, args, schedule, arch)
    res = prog.simulate(arch=arch, memo=True, **exact)
    return {"cycles": res.cycles, "max_abs_error": res.check(rtol=1e-5 * 64, atol=1e-5 * 64)}


def _sae_dataflows(paper) -> list[dict]:
    """SAE full fusion under two dataflows of its one region, at a size every order simulates
    (batch 32, 256 -> 64 -> 256): ours (`i,k,j,l`: each encoder row computed once and
    streamed into the decoder) and the encoder recomputed for every output column (`i,j,k,l`)."""
    sae = example("sae", EXAMPLES)

    model, args, formats = sae.build(batch=32, n_in=256, n_hidden=64, weight_sparsity=0.9)
    op = _run(model, args, formats, "op")
    rows = []
    for order, what in (("i,k,j,l", "each encoder row once"), ("i,j,k,l", "the encoder recomputed per output column")):
        full = _run(model, args, formats, "full", order=order)
        rows.append(
            _row(
                "12",
                "sae",
                "256 (dataflow ablation)",
                f"full over op, order {order}",
                op["cycles"] / full["cycles"],
                paper,
                note=f"ablation, dataflow: {what}",
                cycles={"op": op["cycles"], "full": full["cycles"]},
                max_abs_error=max(op["max_abs_error"], full["max_abs_error"]),
            )
        )
    return rows


def _gcn_ablations(app, dataset, model, args, formats, paper) -> list[dict]:
    """Partial over op with the `rda` memory model, and with the node features dense (the
    paper's cycle counts are an order of magnitude above ours with sparse features)."""
    import torch

    rows = []
    mem = {s: _run(model, args, formats, s, arch="rda") for s in ("op", "layer")}
    dense_args = tuple(a.to_dense() if a.layout != torch.strided else a for a in args)
    dense_formats = {k: v for k, v in formats.items() if k != "X"}
    dense = {s: _run(model, (args[0], dense_args[1]), dense_formats, s) for s in ("op", "layer")}
    for what, runs in (("with the rda memory model", mem), ("with dense features", dense)):
        rows.append(
            _row(
                "12",
                app,
                dataset,
                f"partial over op, {what}",
                runs["op"]["cycles"] / runs["layer"]["cycles"],
                paper,
                note=f"ablation: {what}",
                cycles={k: v["cycles"] for k, v in runs.items()},
                max_abs_error=max(v["max_abs_error"] for v in runs.values()),
            )
        )
    return rows + _gcn_orders(app, dataset, model, args, formats, paper)


def _gcn_features_first(dataset: str, partial, full) -> list[dict]:
    """GCN with each layer computed as A @ (H W^T) + b (the feature transform first, as Kipf
    and Welling's GCN and PyG's GCNConv do) instead of lin(A @ H): the same function."""
    model, args, formats = _build("gcn", dataset, features_first=True)
    runs = {s: _run(model, args, formats, s) for s in ("op", "layer", "full")}
    return [
        _row(
            "12",
            "gcn",
            dataset,
            f"{config} over op, features multiplied first",
            runs["op"]["cycles"] / runs[ours]["cycles"],
            paper,
            note="ablation, model: each layer is A @ (H W^T) + b, the feature transform before the graph multiply",
            cycles={k: v["cycles"] for k, v in runs.items()},
            max_abs_error=max(v["max_abs_error"] for v in runs.values()),
        )
        for config, ours, paper in (("partial", "layer", partial), ("full", "full", full))
    ]


def _gcn_orders(app, dataset, model, args, formats, paper) -> list[dict]:
    """Partial over op under each fused layer's other dataflow orders: the worst and the best
    of those `order="auto"` enumerates, one layer varied at a time (orders the cycle model puts
    over 20x the best one's cycles are not simulated: they run into the cycle limit or take
    minutes)."""
    op = _run(model, args, formats, "op")
    prog = fuseflow.compile(model, args, formats=formats, schedule="layer")
    got: dict[str, int] = {}
    for region, cands in prog.order_candidates.items():
        chosen = prog.orders[region]
        progs = {c.name: prog.reorder({region: c.name}) for c in cands}
        estimated = {name: p.estimate().cycles for name, p in progs.items()}
        limit = 20 * min(estimated.values())
        for name, p in progs.items():
            if estimated[name] > limit:
                continue
            res = p.simulate()
            res.check()
            got[f"{region} {name}" + (" (auto)" if name == chosen else "")] = res.cycles
    best = min(got, key=got.get)
    worst = max(got, key=got.get)
    return [
        _row(
            "12",
            app,
            dataset,
            f"partial over op, {what} of {len(got)} layer orders",
            op["cycles"] / got[name],
            paper,
            note=f"ablation, dataflow: {name}",
            cycles={"op": op["cycles"], "layer": got[name]},
        )
        for what, name in (("the best", best), ("the worst", worst))
    ]


def _gcn_schedules() -> dict:
    from fuseflow import Match, Rule, Schedule

    def only(layer: str) -> Schedule:
        return Schedule.rules(Rule(Match(path=rf"{layer}(\..*)?"), name=layer), label=f"only {layer}")

    return {"full": "full", "layer1": only("conv1"), "layer2": only("conv2"), "both": "layer", "unfused": "unfused"}


def figure14(tier: str, say) -> list[dict]:
    gcn = example("gcn", EXAMPLES)

    rows = []
    names = PAPER["figure14"]["configs"]
    for dataset in TIERS[tier]["14"]:
        say(f"figure 14: gcn {dataset}")
        model, args, formats = gcn.build(graph=_graph(dataset), max_features=None)
        runs, failed = _runs(model, args, formats, _gcn_schedules(), _arch(tier))
        paper = PAPER["figure14"].get(GRAPH_NAMES.get(dataset, ""), None)
        for metric, key, paper_key in (("FLOPs", "alu_ops", "flops"), ("bytes", "mem_bytes", "mem")):
            for c in names:
                theirs = None
                if paper is not None:
                    theirs = paper[paper_key][names.index(c)] / paper[paper_key][names.index("unfused")]
                stopped = _failure(failed, c, "unfused")
                if stopped is not None:
                    rows.append(_row("14", "gcn", dataset, f"{c}: {metric}", None, theirs, *stopped))
                    continue
                ours = runs[c][key] / runs["unfused"][key]
                rows.append(
                    _row(
                        "14",
                        "gcn",
                        dataset,
                        f"{c}: {metric}",
                        ours,
                        theirs,
                        note=f"normalised to unfused; ours counts ALU ops and off-chip bytes ({key})",
                        max_abs_error=runs[c]["max_abs_error"],
                    )
                )
    return rows


def figure15a(tier: str, say) -> list[dict]:
    """Lanes on the fused masked attention (one head, BigBird mask), against ideal scaling."""
    lane_sweep = python_file("parallel_scaling", ROOT / "benchmarks").lane_sweep

    from fuseflow.models import masked_attention as attention

    cfg = TIERS[tier]["15a"]
    model, args, formats = attention(cfg["seq"], cfg["d"], cfg["block"])
    rows, base = [], None
    say(f"figure 15a: attention, lanes {cfg['lanes']}")
    for p, res, err in lane_sweep(model, args, formats, cfg["lanes"]):
        base = base or res.cycles
        rows.append(
            _row(
                "15a",
                "attention",
                f"seq {cfg['seq']}, d {cfg['d']}, block {cfg['block']}",
                f"P = {p}",
                base / res.cycles,
                None,
                note=f"speedup over one lane (ideal {p}x); no default data in the artifact",
                cycles=res.cycles,
                max_abs_error=err,
            )
        )
    return rows


LEVEL_NAMES = {"i": "query rows", "k": "keys", "j": "output features", "l": "the Q.K reduction"}


def figure15b(tier: str, say) -> list[dict]:
    """The same attention with P lanes at each level in turn: which level pays to split."""
    lane_sweep = python_file("parallel_scaling", ROOT / "benchmarks").lane_sweep

    from fuseflow.models import masked_attention as attention

    cfg = TIERS[tier]["15b"]
    model, args, formats = attention(cfg["seq"], cfg["d"], cfg["block"])
    say(f"figure 15b: attention, {cfg['lanes']} lanes at levels {cfg['levels']}")
    (_, one, _), *_ = lane_sweep(model, args, formats, [1])
    rows = []
    for level in cfg["levels"]:
        for p, res, err in lane_sweep(model, args, formats, [cfg["lanes"]], level=level):
            rows.append(
                _row(
                    "15b",
                    "attention",
                    f"seq {cfg['seq']}, d {cfg['d']}, block {cfg['block']}",
                    f"P = {p} at {level} ({LEVEL_NAMES.get(level, level)})",
                    one.cycles / res.cycles,
                    None,
                    note=f"speedup over one lane (ideal {p}x); no default data in the artifact",
                    cycles=res.cycles,
                    max_abs_error=err,
                )
            )
    return rows


def figure16(tier: str, say) -> list[dict]:
    """Blocked vs unstructured masked attention: the mask's block size b, lowered over b x b tiles."""
    from fuseflow.models import masked_attention as attention

    cfg = TIERS[tier]["16"]
    rows = []
    for b in cfg["blocks"]:
        say(f"figure 16: attention, block {b}")
        model, args, formats = attention(cfg["seq"], cfg["d"], b)
        plain = fuseflow.compile(model, args, formats=formats, schedule="full").simulate()
        blocked = fuseflow.compile(model, args, formats=formats, schedule="full", passes=f"block{{size={b}}}")
        res = blocked.simulate()
        err = max(plain.check(), res.check())
        rows.append(
            _row(
                "16",
                "attention",
                f"seq {cfg['seq']}, d {cfg['d']}",
                f"b = {b}",
                plain.cycles / res.cycles,
                None,
                note="blocked over unstructured (b x b tiles on a matmul unit); no default data in the artifact",
                cycles={"unstructured": plain.cycles, "blocked": res.cycles},
                max_abs_error=err,
            )
        )
    return rows


def figure17(tier: str, say) -> list[dict]:
    spgemm_chain = example("spgemm_chain", EXAMPLES)

    rows = []
    for density in TIERS[tier]["17"]:
        say(f"figure 17: spgemm chain, density {density}")
        model, args, formats = spgemm_chain.build(density=density)
        first = fuseflow.compile(model, args, formats=formats, schedule="full")
        region = next(iter(first.order_candidates))
        cycles: dict[str, int] = {}
        errors = {}
        for c in first.order_candidates[region]:
            try:
                res = first.reorder({region: c.name}).simulate()
                errors[c.name] = res.check()
                cycles[c.name] = res.cycles
            except fuseflow.FuseflowError:
                continue  # an order that does not lower is not a bar
        worst = max(cycles.values())
        for order, cyc in cycles.items():
            rows.append(
                _row(
                    "17",
                    "spgemm chain",
                    f"karate, {1 - density:.0%} sparse",
                    order + (" (auto)" if order == first.orders[region] else ""),
                    worst / cyc,
                    None,
                    note="speedup over the worst order; the artifact has no default data for this figure",
                    cycles=cyc,
                    max_abs_error=errors[order],
                )
            )
    return rows


def markdown(
    rows: list[dict],
    tier: str,
    wall: float,
    jobs: int = 1,
    md: Path = ROOT / "docs" / "paper.md",
    plots: Path = ROOT / "docs" / "results" / "paper",
    peak_gb: float | None = None,
    runs: list[dict] | None = None,
) -> str:
    """The page: the command that made it, then each figure's plot and table (paths relative to
    the page, so any `--md` / `--plots` pair links up). `runs` (a JSON's ``runs``: rows merged
    from several runs, each ``{"command", "wall_s", "peak_rss_gb", "note"}``) lists those runs
    in place of the one command."""
    here = Path(os.path.relpath(Path(plots).resolve(), Path(md).resolve().parent))
    shown = {"md": os.path.relpath(Path(md).resolve(), ROOT), "plots": os.path.relpath(Path(plots).resolve(), ROOT)}
    stopped = sum(r["source"] == "failed" for r in rows)
    skipped = sum(r["source"] == "skipped" for r in rows)
    checked = (
        "The paper's numbers are the default data of the artifact's plotting scripts "
        "(`benchmarks/paper/numbers.json` names the commit). Every value of ours is simulated and its "
        "outputs checked against PyTorch"
        + (
            f"; {stopped} rows have none (`-`): a schedule stopped at that size, the reason in the JSON's `note`"
            if stopped
            else ""
        )
        + (f"; {skipped} rows were not run (`-`, the JSON's `note` says which)" if skipped else "")
        + "."
    )
    if runs:
        out = ["# FuseFlow's figures, ours beside the paper's", "", f"The `{tier}` tier, merged from these runs:", ""]
        for run in runs:
            peak = f", peak {run['peak_rss_gb']} GB resident" if run.get("peak_rss_gb") else ""
            note = f"; {run['note']}" if run.get("note") else ""
            out.append(f"- `{run['command']}` ({run['wall_s']:.0f} s{peak}{note})")
        out += [
            "",
            f"(fuseflow {fuseflow.__version__}; the page: `python benchmarks/paper.py --from "
            f"docs/results/paper_{tier}.json --md {shown['md']} --plots {shown['plots']}`.) {checked}",
            "",
        ]
        out = _figures(out, rows, here)
        own = ROOT / "benchmarks" / "paper" / f"findings_{tier}.md"  # what this tier's runs show
        out.append((own if own.exists() else ROOT / "benchmarks" / "paper" / "findings.md").read_text())
        return "\n".join(out)
    out = [
        "# FuseFlow's figures, ours beside the paper's",
        "",
        f"`python benchmarks/paper.py --figure all --tier {tier} -o docs/results/paper_{tier}.json "
        f"--md {shown['md']} --plots {shown['plots']}{f' --jobs {jobs}' if jobs > 1 else ''}` "
        f"(fuseflow {fuseflow.__version__}, {wall:.0f} s on 2 cores"
        + (f", peak {peak_gb} GB resident" if peak_gb else "")
        + "). "
        + checked,
        "",
    ]
    out = _figures(out, rows, here)
    out.append((ROOT / "benchmarks" / "paper" / "findings.md").read_text())
    return "\n".join(out)


def _figures(out: list[str], rows: list[dict], here: Path) -> list[str]:
    """`out` followed by each figure's plot and table."""
    for fig in FIGURES:
        fr = [r for r in rows if r["figure"] == fig]
        if not fr:
            continue
        out += [f"## Figure {fig}", "", f"![figure {fig}]({here.as_posix()}/figure{fig}.png)", ""]
        out += ["| app | dataset | config | ours | paper | ours / paper |", "|---|---|---|---|---|---|"]
        for r in fr:
            ours = "-" if r["ours"] is None else ("~" if r.get("intervals") else "") + f"{r['ours']:.3g}"
            paper = "-" if r["paper"] is None else f"{r['paper']:.3g}"
            ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
            flag = " **" if r["ratio"] is not None and not (1 / 1.3 <= r["ratio"] <= 1.3) else ""
            out.append(f"| {r['app']} | {r['dataset']} | {r['config']} | {ours} | {paper} | {ratio}{flag} |")
        out.append("")
    out += ["`**`: ours and the paper's differ by more than 1.3x.", ""]
    if any(r.get("intervals") for r in rows):
        out += ["`~`: sampled simulation (docs/sampling.md); each schedule's interval: the JSON's `intervals`.", ""]
    return out


def plot(rows: list[dict], directory: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    directory.mkdir(parents=True, exist_ok=True)
    for fig in FIGURES:
        fr = [r for r in rows if r["figure"] == fig and r["ours"] is not None]
        if not fr:
            continue
        labels = [f"{r['app']} {r['dataset']}\n{r['config']}" for r in fr]
        x = np.arange(len(fr))
        f, ax = plt.subplots(figsize=(max(6, 0.5 * len(fr)), 3.5))
        ax.bar(x - 0.2, [r["ours"] or 0 for r in fr], 0.4, label="fuseflow")
        ax.bar(x + 0.2, [r["paper"] or 0 for r in fr], 0.4, label="paper (artifact defaults)")
        ax.set_xticks(x, labels, rotation=75, fontsize=6)
        ax.set_yscale("log")
        ax.set_title(f"Figure {fig}")
        ax.legend(fontsize=7)
        f.tight_layout()
        f.savefig(directory / f"figure{fig}.png", dpi=120)
        plt.close(f)


def _reused(saved: dict) -> dict[str, dict[str, dict]]:
    """Per Figure 12 point (``app:dataset``), each schedule a saved run simulated: its cycles,
    and as its error the least `max_abs_error` of the rows that read it (each row's is the
    larger of its two schedules', so this bounds the schedule's own). Ablation rows (another
    dataset name) never match a point."""
    out: dict[str, dict[str, dict]] = {}
    for r in saved["rows"]:
        if r["figure"] != "12" or r["source"] != "simulated" or not r.get("cycles"):
            continue
        point = out.setdefault(f"{r['app']}:{r['dataset']}", {})
        err = r.get("max_abs_error")
        for schedule, cycles in r["cycles"].items():
            prev = point.setdefault(schedule, {"cycles": cycles, "max_abs_error": err, "reused": True})
            if err is not None and (prev["max_abs_error"] is None or err < prev["max_abs_error"]):
                prev["max_abs_error"] = err
    return out


def _merged(saved: dict, rows: list[dict]) -> list[dict]:
    """`saved`'s rows with those of the same figure, app, dataset and config replaced by `rows`
    (in place), and `rows` new to it appended."""
    key = lambda r: (r["figure"], r["app"], r["dataset"], r["config"])  # noqa: E731
    new = {key(r): r for r in rows}
    out = [new.pop(key(r), r) for r in saved["rows"]]
    return out + [r for r in rows if key(r) in new]


def _runs_of(saved: dict) -> list[dict]:
    """The runs a saved JSON was made from (one, for a JSON no `--reuse` extended)."""
    return saved.get("runs") or [{k: saved[k] for k in ("wall_s", "peak_rss_gb") if k in saved}]


def merge_extensions(saved: dict, extended: list[dict]) -> dict:
    """`saved` with what each of `extended` added to it: JSONs that runs with `--reuse` of the
    same saved run wrote side by side (points run in separate processes). Each one's rows that
    differ from `saved`'s replace them or are appended, its runs after `saved`'s are appended,
    and the wall times add up. A JSON that did not extend `saved` is refused."""
    base = _runs_of(saved)
    out = {**saved, "runs": list(base), "rows": list(saved["rows"])}
    key = lambda r: (r["figure"], r["app"], r["dataset"], r["config"])  # noqa: E731
    original = {key(r): r for r in saved["rows"]}
    for ext in extended:
        runs = _runs_of(ext)
        if ext.get("tier") != saved.get("tier") or runs[: len(base)] != base or len(runs) == len(base):
            raise ValueError("a JSON to merge must be written with --reuse of the saved run, at its tier")
        out["rows"] = _merged(out, [r for r in ext["rows"] if original.get(key(r)) != r])
        new_runs = runs[len(base) :]
        out["runs"] += new_runs
        out["wall_s"] = round(out["wall_s"] + sum(r.get("wall_s", 0.0) for r in new_runs), 1)
        out["peak_rss_gb"] = max([out.get("peak_rss_gb") or 0] + [r.get("peak_rss_gb") or 0 for r in new_runs])
    return out


def tasks(
    figures: tuple[str, ...],
    tier: str,
    only: tuple[str, ...] = (),
    reuse: dict | None = None,
    skip: tuple[str, ...] = (),
) -> list[tuple]:
    """The independent points of `figures`: one per Figure 12 application and dataset (those
    `only` names, as ``app`` or ``app:dataset``, in its order, when given), one per other figure.
    A Figure 12 point carries the schedules `reuse` (`_reused`) has for it and those to `skip`."""
    out: list[tuple] = []
    points = TIERS[tier]["12"]
    if only:
        picked = [k for sel in only for k, (app, dataset) in enumerate(points) if sel in (app, f"{app}:{dataset}")]
        unknown = [sel for sel in only if not any(sel in (a, f"{a}:{d}") for a, d in points)]
        if unknown:
            raise ValueError(
                f"no Figure 12 point {unknown[0]!r} in the {tier} tier: {', '.join(f'{a}:{d}' for a, d in points)}"
            )
    else:
        picked = list(range(len(points)))
    for f in figures:
        if f == "12":
            for k in dict.fromkeys(picked):
                app, dataset = points[k]
                out.append((tier, f, k, (reuse or {}).get(f"{app}:{dataset}"), skip))
        else:
            out.append((tier, f, None, None, ()))
    return out


def run_task(
    tier: str, figure: str, k: int | None, reused: dict | None = None, skip: tuple[str, ...] = ()
) -> list[dict]:
    """One point's rows (module-level: executor workers call it)."""

    def say(m: str) -> None:
        print(m, file=sys.stderr, flush=True)

    if figure == "12" and k is not None:
        return figure12_point(tier, k, say, reused, skip)
    run = {"12": figure12, "14": figure14, "15a": figure15a, "15b": figure15b, "16": figure16, "17": figure17}
    return run[figure](tier, say)


def _export_run_options(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """`--sample`, `--checkpoint` and `--spill` into the environment, which worker processes inherit."""
    if a.sample and (a.checkpoint or a.spill):
        ap.error("--sample estimates; --checkpoint and --spill run exactly: choose one")
    for env, value in ((SAMPLE_ENV, a.sample), (CHECKPOINT_ENV, a.checkpoint), (SPILL_ENV, a.spill)):
        if value:
            os.environ[env] = str(value)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--figure", default="all", help="12, 14, 15a, 15b, 16, 17 or all (comma-separated)")
    ap.add_argument("--tier", default="quick", choices=sorted(TIERS))
    ap.add_argument("-o", "--output")
    ap.add_argument("--md", help="write the Markdown page here")
    ap.add_argument("--plots", help="write one PNG per figure into this directory")
    ap.add_argument("--from", dest="source", help="a JSON this script wrote: rewrite --md and --plots from it")
    ap.add_argument("--jobs", type=int, default=1, help="points at once (worker processes; default 1)")
    ap.add_argument("--executor", default="local", choices=("local", "ray"), help="where points run (as fuseflow dse)")
    ap.add_argument("--address", help="a Ray cluster's address (--executor ray)")
    ap.add_argument(
        "--only",
        help="Figure 12 points to run, in this order: app or app:dataset, comma-separated (e.g. gcn,sae:1024x1024)",
    )
    ap.add_argument(
        "--skip",
        help="Figure 12 schedules not to run (comma-separated: op, unfused, layer, partial, full): their rows "
        "have no value and say so (source `skipped`)",
    )
    ap.add_argument(
        "--merge",
        help="JSONs (comma-separated) that runs with --reuse of the same saved run wrote side by side: "
        "-o writes the saved run with what each added, running nothing",
    )
    ap.add_argument(
        "--reuse",
        help="a JSON this script wrote at this tier: Figure 12 schedules it simulated are not run again, and "
        "-o writes it extended (this run's rows replace its rows of the same point and config)",
    )
    ap.add_argument(
        "--sample",
        nargs="?",
        const="2%@95%",
        metavar="ERROR[@CONF]",
        help="sampled simulation of Figure 12's schedules (docs/sampling.md); rows marked ~ in the page",
    )
    ap.add_argument(
        "--checkpoint",
        metavar="DIR[@EVERY]",
        help="GPT's schedules keep their progress in DIR (a stopped command, run again, continues), with "
        "states every EVERY (default 10m; docs/pieces.md)",
    )
    ap.add_argument("--spill", type=int, metavar="N", help="GPT's runs keep queues over N tokens on disk")
    a = ap.parse_args(argv)
    _export_run_options(ap, a)
    if a.source:
        saved = json.loads(Path(a.source).read_text())
        if a.md:
            page = markdown(
                saved["rows"],
                saved["tier"],
                saved["wall_s"],
                saved.get("jobs", 1),
                Path(a.md),
                Path(a.plots or ROOT / "docs" / "results" / "paper"),
                saved.get("peak_rss_gb"),
                saved.get("runs"),
            )
            Path(a.md).write_text(page)
        if a.plots:
            plot(saved["rows"], Path(a.plots))
        return 0
    figures = FIGURES if a.figure == "all" else tuple(a.figure.split(","))
    unknown = [f for f in figures if f not in FIGURES]
    if unknown:
        ap.error(f"unknown figure {unknown[0]}: one of {', '.join(FIGURES)} or all")
    t0 = time.perf_counter()
    from fuseflow.executor import make_executor

    earlier = json.loads(Path(a.reuse).read_text()) if a.reuse else None
    if earlier is not None and earlier["tier"] != a.tier:
        ap.error(f"--reuse {a.reuse} is a {earlier['tier']} run, not {a.tier}")
    if a.merge:
        if earlier is None or not a.output:
            ap.error("--merge needs --reuse (the saved run they extended) and -o")
        try:
            merged = merge_extensions(earlier, [json.loads(Path(p).read_text()) for p in a.merge.split(",")])
        except ValueError as e:
            ap.error(str(e))
        Path(a.output).write_text(json.dumps(merged, indent=1))
        return 0
    skip = tuple(a.skip.split(",")) if a.skip else ()
    unknown = [k for k in skip if k not in SKIPPABLE]
    if unknown:
        ap.error(f"--skip {unknown[0]}: not a Figure 12 schedule ({', '.join(SKIPPABLE)})")
    try:
        todo = tasks(
            figures,
            a.tier,
            tuple(a.only.split(",")) if a.only else (),
            _reused(earlier) if earlier else None,
            skip,
        )
    except ValueError as e:
        ap.error(str(e))
    done: dict[int, list[dict]] = {}
    pool = make_executor(a.executor, a.address, a.jobs)
    try:
        for i, got in pool.run(run_task, todo):
            done[i] = got
            for row in got:
                print(json.dumps(row), flush=True)
    finally:
        pool.close()
    rows = [row for i in range(len(todo)) for row in done[i]]  # in figure order, however they finished
    wall = time.perf_counter() - t0
    peak = _peak_rss_gb()
    if a.output:
        saved = {"tier": a.tier, "wall_s": round(wall, 1), "jobs": a.jobs, "peak_rss_gb": peak, "rows": rows}
        if earlier is not None:
            this = {"command": "python benchmarks/paper.py " + " ".join(argv if argv is not None else sys.argv[1:])}
            this.update(wall_s=round(wall, 1), peak_rss_gb=peak)
            runs = _runs_of(earlier)
            saved = {
                **earlier,
                "wall_s": round(earlier["wall_s"] + wall, 1),
                "peak_rss_gb": max(earlier.get("peak_rss_gb") or 0, peak),
                "runs": [*runs, this],
                "rows": _merged(earlier, rows),
            }
        Path(a.output).write_text(json.dumps(saved, indent=1))
    if a.md:
        plots = Path(a.plots or ROOT / "docs" / "results" / "paper")
        Path(a.md).write_text(markdown(rows, a.tier, wall, a.jobs, Path(a.md), plots, peak))
    if a.plots:
        plot(rows, Path(a.plots))
    print(f"{len(rows)} rows from {len(todo)} points in {wall:.0f} s, peak {peak} GB resident", file=sys.stderr)
    return 0


def _peak_rss_gb() -> float:
    """The largest resident set of this process or any worker it waited for (Linux: KiB)."""
    import resource

    kib = max(resource.getrusage(w).ru_maxrss for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return round(kib / 2**20, 2)


if __name__ == "__main__":
    sys.exit(main())
