"""Compile time per application and schedule (frontend + partition + lowering + parse).

Prints JSON and a table. Usage: python benchmarks/compile_time.py [--quick]

    python benchmarks/compile_time.py --decoders 1,12   # GPT-3 Small with 1 and 12 decoders,
                                                        # unfused, frontend vs lowering seconds
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
os.environ.setdefault("TMPDIR", str(ROOT / "build" / "tmp"))

import fuseflow  # noqa: E402
from fuseflow.model_files import example  # noqa: E402

gcn = example("gcn", EXAMPLES)
gpt_bigbird = example("gpt_bigbird", EXAMPLES)
graphsage = example("graphsage", EXAMPLES)
sae = example("sae", EXAMPLES)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="the test-size transformer only")
    ap.add_argument("--decoders", help="GPT-3 Small (seq 1024) with these numbers of decoders, e.g. 1,12")
    ap.add_argument(
        "--rounds", type=int, default=1, help="with --decoders: measure each count this many times, alternating"
    )
    a = ap.parse_args()
    if a.decoders:
        _decoders([int(x) for x in a.decoders.split(",")], a.rounds)
        return
    gpt_opts = dict(seq=64, d_model=32, heads=2, d_ff=64, block=16) if a.quick else {}
    cases = [("gcn", gcn, {}), ("graphsage", graphsage, {}), ("sae", sae, {}), ("gpt_bigbird", gpt_bigbird, gpt_opts)]
    rows = []
    for name, mod, opts in cases:
        model, args, formats = mod.build(**opts)
        for sched in ("unfused", "layer", "full"):
            t0 = time.perf_counter()
            prog = fuseflow.compile(model, args, formats=formats, schedule=sched)
            dt = time.perf_counter() - t0
            rows.append(
                {
                    "model": name,
                    "schedule": sched,
                    "compile_s": round(dt, 2),
                    "regions": len(prog.graphs),
                    "sam_nodes": sum(len(g.nodes) for g in prog.graphs),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    from rich.console import Console
    from rich.table import Table

    t = Table(title="compile time (torch.export + torch-mlir + fuseflow lowering)")
    for h in ("model", "schedule", "regions", "sam nodes", "compile s"):
        t.add_column(h, justify="left" if h in ("model", "schedule") else "right")
    for r in rows:
        t.add_row(r["model"], r["schedule"], str(r["regions"]), str(r["sam_nodes"]), f"{r['compile_s']:.2f}")
    Console(width=120).print(t)


def _decoders(counts: list[int], rounds: int = 1) -> None:
    """GPT-3 Small unfused with N decoders: the frontend (torch.export + torch-mlir) and
    fuseflow's lowering timed apart, after a warm-up compile of a small model (imports paid),
    and the time spent in garbage collections. Identical decoders share their order search and
    ranking. Each row's compile time is also given over the first count's in its round."""
    from fuseflow.compiler import lower_program
    from fuseflow.frontend.export import import_model
    from fuseflow.heap import old_objects_frozen

    rows = []
    collected: list[float] = []  # seconds of each garbage collection during the compile
    started: list[float] = [0.0]

    def timed(phase: str, info: dict) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            collected.append(time.perf_counter() - started[0])

    gc.callbacks.append(timed)
    # warm: the first export in a process imports torch.export, dynamo and torch-mlir (2-3 s)
    small, small_args, small_formats = gpt_bigbird.build(seq=32, d_model=16, heads=2, d_ff=32, block=8, layers=2)
    warm = import_model(small, small_args, small_formats)
    lower_program(
        small, small_args, warm, warm.module.operation.get_asm(enable_debug_info=True), "unfused", 100_000, None, None
    )
    for n in [c for _ in range(rounds) for c in counts]:
        model, args, formats = gpt_bigbird.build(gpt3_small=True, layers=n)
        collected.clear()
        with old_objects_frozen():  # as compile() runs
            t0 = time.perf_counter()
            imported = import_model(model, args, formats)
            t1 = time.perf_counter()
            asm = imported.module.operation.get_asm(enable_debug_info=True)
            prog = lower_program(model, args, imported, asm, "unfused", 100_000, None, None)
            t2 = time.perf_counter()
        rows.append(
            {
                "decoders": n,
                "regions": len(prog.graphs),
                "orders": len(set(prog.orders.values())),
                "frontend_s": round(t1 - t0, 2),
                "lowering_s": round(t2 - t1, 2),
                "compile_s": round(t2 - t0, 2),
                "gc_s": round(sum(collected), 2),
            }
        )
        first = rows[len(rows) - 1 - (len(rows) - 1) % len(counts)]  # this round's first count
        rows[-1]["over_first"] = round(rows[-1]["compile_s"] / first["compile_s"], 2)
        print(json.dumps(rows[-1]), flush=True)
    gc.callbacks.remove(timed)
    print(f"| decoders | regions | frontend s | lowering s | compile s | in the collector s | x {counts[0]} |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        keys = ("decoders", "regions", "frontend_s", "lowering_s", "compile_s", "gc_s", "over_first")
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
