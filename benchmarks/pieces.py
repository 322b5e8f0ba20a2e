"""A large region run whole, whole with its long queues on disk, and in pieces: peak memory,
wall time, taped bytes, exactness (docs/pieces.md, docs/simulator-performance.md "Queues on disk").

    python benchmarks/pieces.py -o docs/results/pieces.json
    python benchmarks/pieces.py --seq 128 --d-model 64 --pieces 1 4 --spill 4096

GPT-BigBird under FuseFlow's cross-decoder full schedule (the region that fuses the rest of
decoder d with the LayerNorm and QKV projections of decoder d + 1; at GPT-3 Small's size it
needs more than 16 GiB of queued tokens whole). The largest region's graph and packed inputs
are written once; each configuration then runs in a fresh process that loads only them, so
its peak resident memory is the simulation's (plus numpy), not the compiler's. Every run in
pieces must give the whole run's cycles and every node's counters; the table says so per row.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
LIMITS = {"max_cycles": 10**12, "max_fifo_mib": 16384}
os.environ.setdefault("TMPDIR", str(ROOT / "build" / "tmp"))
os.makedirs(os.environ["TMPDIR"], exist_ok=True)


def prepare(seq: int, d_model: int, layers: int, path: Path) -> dict:
    """Compile GPT-BigBird's cross-decoder schedule and keep its largest region and inputs."""
    import fuseflow
    from fuseflow.model_files import example

    gpt_bigbird = example("gpt_bigbird", EXAMPLES)
    from fuseflow.sim.arch import Arch
    from fuseflow.sim.graph import pack_inputs

    geo = {"seq": seq, "d_model": d_model, "heads": 2, "d_ff": 4 * d_model, "layers": layers, "block": 16}
    model, args, formats = gpt_bigbird.build(**geo)
    t = time.perf_counter()
    prog = fuseflow.compile(
        model, args, formats=formats, schedule=gpt_bigbird.fuseflow_full_schedule(layers), node_budget=1_000_000
    )
    compile_s = time.perf_counter() - t
    env = prog.bind(prog.example_args)
    arch = Arch.resolve(LIMITS)
    big = max(range(len(prog.graphs)), key=lambda i: len(prog.graphs[i].nodes))
    from fuseflow.sim.graph import run_graph

    for g in prog.graphs[:big]:  # the largest region's inputs: the regions before it, simulated
        env.update(run_graph(g, env, arch).outputs)
    g = prog.graphs[big]
    tokens = next(r for r in prog.estimate(arch=arch).regions if r.name == g.name).nodes
    with path.open("wb") as f:  # with the predicted tokens per node that simulate(pieces=N) cuts by
        pickle.dump((g, pack_inputs(g, env), arch, [n.tokens for n in tokens]), f)
    return {"geometry": geo, "region": g.name, "nodes": len(g.nodes), "compile_s": round(compile_s, 1)}


def measure(path: str, pieces: int, spill: int) -> dict:
    """One configuration in this (fresh) process: 1 = whole; `spill` > 0: whole, queues longer
    than `spill` tokens kept on disk."""
    from fuseflow.sim.arch import Arch
    from fuseflow.sim.graph import run_packed
    from fuseflow.sim.pieces import run_in_pieces

    with open(path, "rb") as f:
        g, packed, arch, tokens = pickle.load(f)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    if spill:
        run, summary = run_packed(g, packed, Arch.resolve({**LIMITS, "spill_tokens": spill})), None
    elif pieces == 1:
        run, summary = run_packed(g, packed, arch), None
    else:
        run, summary = run_in_pieces(g, packed, arch, pieces, tokens=tokens)
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = {
        "pieces": pieces,
        "spill_tokens": spill,
        "cycles": run.cycles,
        "wall_s": round(wall, 1),
        "peak_rss_gb": round(peak / 1e6, 3),
        "loaded_rss_gb": round(base / 1e6, 3),
        "nodes": run.nodes,
    }
    if summary is not None:
        out.update(tokens=summary.tokens, bytes=summary.bytes, bytes_per_token=round(summary.bytes_per_token, 2))
    if run.spill is not None:
        out["spill"] = run.spill
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--pieces", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--spill", type=int, nargs="*", default=[4096], help="whole runs with this spill_tokens")
    ap.add_argument("-o", "--output")
    ap.add_argument("--measure", nargs=3, help=argparse.SUPPRESS)  # PATH PIECES SPILL: one configuration, as JSON
    a = ap.parse_args()
    if a.measure:
        print(json.dumps(measure(a.measure[0], int(a.measure[1]), int(a.measure[2]))))
        return
    from fuseflow.cli.common import print_table

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "region.pkl"
        point = prepare(a.seq, a.d_model, a.layers, path)
        runs = []
        for k, spill in [(k, 0) for k in a.pieces] + [(1, n) for n in a.spill]:
            proc = subprocess.run(
                [sys.executable, __file__, "--measure", str(path), str(k), str(spill)],
                capture_output=True,
                text=True,
                check=True,
            )
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    whole = next((r for r in runs if r["pieces"] == 1 and not r["spill_tokens"]), None)
    for r in runs:
        r["exact"] = None if whole is None else (r["cycles"] == whole["cycles"] and r["nodes"] == whole["nodes"])
    for r in runs:
        del r["nodes"]
    rows = [
        [
            f"whole, spill {r['spill_tokens']:,}"
            if r["spill_tokens"]
            else "whole"
            if r["pieces"] == 1
            else str(r["pieces"]),
            f"{r['cycles']:,}",
            f"{r['peak_rss_gb']:.2f}",
            f"{r['wall_s']:.1f}",
            f"{r.get('tokens', 0):,}",
            f"{r.get('bytes_per_token', 0):.2f}",
            f"{r['spill']['queues']:,} / {r['spill']['peak_bytes'] / 1e9:.2f}" if r.get("spill") else "-",
            {None: "-", True: "yes", False: "NO"}[r["exact"]],
        ]
        for r in runs
    ]
    title = f"{point['region']} ({point['nodes']:,} nodes), GPT-BigBird {point['geometry']}"
    print_table(
        title,
        rows,
        ["run", "cycles", "peak GB", "wall s", "taped tokens", "bytes/token", "spilled queues / peak disk GB", "exact"],
    )
    if a.output:
        Path(a.output).write_text(json.dumps({"point": point, "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
