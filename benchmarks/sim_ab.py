"""Interleaved A/B of simulator builds on one recorded graph (docs/simulator-performance.md).

This VM's wall time drifts by up to 1.7x between runs of one binary, so a single timing says
little. This script records one graph's C++ construction calls once; torch is needed only then.
It then alternates short processes, one per build, round after round, and prints medians and
quartiles. The timed processes import numpy and the extension module only, so they also run
under valgrind in seconds, for instruction counts.

  python benchmarks/sim_ab.py record build/ab/g27k.pkl --n 27000
  cp .venv/lib/python3.11/site-packages/fuseflow/_simulator*.so build/ab/a.so   # one copy per build
  python benchmarks/sim_ab.py compare build/ab/g27k.pkl build/ab/a.so build/ab/b.so --rounds 8
  valgrind --tool=callgrind --toggle-collect='fuseflow::sim::Graph::run_window*' \\
      .venv/bin/python benchmarks/sim_ab.py run build/ab/g8k.pkl build/ab/a.so
  python benchmarks/sim_ab.py anchor build/ab/a.so build/ab/b.so   # whole simulate() on the SDDMM anchor
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pickle
import statistics
import subprocess
import sys
import time
from pathlib import Path


def record(path: Path, n: int, degree: int, kernel: str = "spmm") -> None:
    """Save the C++ construction calls of one simulated graph: the synthetic SpMM of
    benchmarks/sim_throughput.py (`n`, `degree`), or ``sddmm``, the issue's small-kernel anchor
    (B 128x128 5% CSR, C 128x256, D 256x128, order i,j,k, `sam` preset)."""
    import numpy as np
    import sim_throughput as st  # a sibling script: run as one, this folder is on sys.path
    import torch

    import fuseflow
    import fuseflow.sim.graph as sim_graph
    from fuseflow.model_files import example

    examples = Path(__file__).resolve().parents[1] / "examples"

    if kernel == "sddmm":
        kernels = example("kernels", examples)

        model, args, formats = kernels.build(kernel="sddmm", n=128, k=256, density=0.05)
        prog = fuseflow.compile(model, args, formats=formats, schedule="full", order={"full": "i,j,k"})
        sim_args, arch = args, "sam"
    else:
        A = st.synthetic(n, degree)
        X = np.random.default_rng(0).random((n, 16), dtype=np.float32)
        prog = fuseflow.compile(
            st.MatMul(), (torch.tensor(A.toarray()), torch.tensor(X)), formats={"A": "csr", "X": "dense"}
        )
        prog.example_args = ()
        sim_args, arch = (st.csr_tensor(A), torch.tensor(X)), "comal"
    calls: dict = {"nodes": []}
    real = sim_graph._simulator.Graph

    class Recorder:  # stands in for the extension's Graph while `simulate` builds one graph
        def __init__(self, arch):
            calls["arch"] = arch
            self.g = real(arch)

        def __len__(self):
            return len(self.g)

        def add_node(self, *args):
            calls["nodes"].append(args)
            return self.g.add_node(*args)

        def run(self, *args):
            return self.g.run(*args)

        @property
        def window_capable(self):
            return self.g.window_capable

    sim_graph._simulator.Graph = Recorder
    try:
        prog.simulate(*sim_args, arch=arch, engine="window")
    finally:
        sim_graph._simulator.Graph = real
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(calls))
    print(f"{path}: {len(calls['nodes'])} nodes, {kernel}" + (f" n={n}" if kernel == "spmm" else ""))


def run(path: Path, so: Path, repeat: int, engine: str) -> list[float]:
    """Build and run the recorded graph with the extension at `so`; M events/s of each run's loop."""
    spec = importlib.util.spec_from_file_location("_simulator", so)
    sim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sim)
    calls = pickle.loads(path.read_bytes())
    rates = []
    for _ in range(repeat):
        g = sim.Graph(calls["arch"])
        for kind, name, inputs, params in calls["nodes"]:
            g.add_node(kind, name, [tuple(i) for i in inputs], params)
        t0 = time.perf_counter()
        res = g.run(10**12, False, [], False, None, 1 << 20, engine)
        loop = time.perf_counter() - t0
        rates.append(sum(int(nd["tokens_out"]) for nd in res["nodes"]) / loop / 1e6)
    return rates


def anchor_times(so: Path, calls: int) -> list[float]:
    """Milliseconds of whole `simulate()` calls (packing, graph building, the run, the results) on
    the SDDMM anchor, with the extension at `so` standing in for the installed one."""
    spec = importlib.util.spec_from_file_location("fuseflow._simulator", so)
    sim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sim)
    sys.modules["fuseflow._simulator"] = sim  # before fuseflow imports it
    import fuseflow
    from fuseflow.model_files import example

    kernels = example("kernels", Path(__file__).resolve().parents[1] / "examples")

    model, args, formats = kernels.build(kernel="sddmm", n=128, k=256, density=0.05)
    prog = fuseflow.compile(model, args, formats=formats, schedule="full", order={"full": "i,j,k"})
    prog.simulate(arch="sam", engine="window")  # builds without the window+event hand-over run too
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        prog.simulate(arch="sam", engine="window")
        out.append(1000 * (time.perf_counter() - t0))
    return out


def anchor(builds: list[Path], rounds: int, calls: int) -> None:
    """Interleave whole-`simulate()` timings of the SDDMM anchor across builds; print a table and
    JSON. SAM's own Python simulator takes 2.9-3.2 s on this kernel (SAM's syn128 matrix, K=256)."""
    times: dict[Path, list[float]] = {b: [] for b in builds}
    for _ in range(rounds):
        for b in builds:
            out = subprocess.run(
                [sys.executable, __file__, "anchor-run", str(b), "--calls", str(calls)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            times[b] += json.loads(out.strip().splitlines()[-1])
    rows = {}
    print("| build | simulate() ms, median | quartiles | best | x SAM (3.0 s) |\n|---|---:|---:|---:|---:|")
    for b, t in times.items():
        t.sort()
        med = statistics.median(t)
        rows[str(b)] = {"median_ms": med, "q1_ms": t[len(t) // 4], "q3_ms": t[3 * len(t) // 4], "best_ms": t[0]}
        print(f"| {b} | {med:.2f} | {t[len(t) // 4]:.2f}-{t[3 * len(t) // 4]:.2f} | {t[0]:.2f} | {3000 / med:.0f} |")
    print(json.dumps(rows))


def compare(path: Path, builds: list[Path], rounds: int, repeat: int, engine: str) -> None:
    rates: dict[Path, list[float]] = {b: [] for b in builds}
    for _ in range(rounds):
        for b in builds:  # alternate: drift hits every build alike
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "run",
                    str(path),
                    str(b),
                    "--repeat",
                    str(repeat),
                    "--engine",
                    engine,
                    "--json",
                ],
                capture_output=True,
                text=True,
                check=True,
                env=dict(os.environ),
            ).stdout
            rates[b] += json.loads(out)
    for b, r in rates.items():
        r.sort()
        print(
            f"{b}: median {statistics.median(r):.1f}  quartiles {r[len(r) // 4]:.1f}-{r[3 * len(r) // 4]:.1f}  "
            f"best {r[-1]:.1f} M events/s  ({len(r)} runs, {engine} engine)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="compile the synthetic SpMM and save its graph")
    r.add_argument("graph", type=Path)
    r.add_argument("--n", type=int, default=27000, help="nodes of the synthetic graph (27000: 108k nnz)")
    r.add_argument("--degree", type=int, default=4)
    r.add_argument("--kernel", choices=("spmm", "sddmm"), default="spmm", help="sddmm: the small-kernel anchor")
    for name in ("run", "compare"):
        p = sub.add_parser(name, help="time one build" if name == "run" else "interleave several builds")
        p.add_argument("graph", type=Path)
        p.add_argument("builds", type=Path, nargs="+" if name == "compare" else 1)
        p.add_argument("--repeat", type=int, default=3, help="runs per process")
        p.add_argument("--engine", choices=("window", "event"), default="window")
        if name == "compare":
            p.add_argument("--rounds", type=int, default=8)
        else:
            p.add_argument("--json", action="store_true", help="print the rates as JSON")
    p = sub.add_parser("anchor", help="whole simulate() calls on the SDDMM anchor, builds interleaved")
    p.add_argument("builds", type=Path, nargs="+")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--calls", type=int, default=20, help="timed calls per process")
    p = sub.add_parser("anchor-run", help="one build's whole simulate() calls (JSON milliseconds)")
    p.add_argument("builds", type=Path, nargs=1)
    p.add_argument("--calls", type=int, default=20)
    a = ap.parse_args()
    if a.cmd in ("anchor", "anchor-run"):
        for f in a.builds:
            if not f.is_file():
                ap.error(f"{f}: no such file (copy each build's _simulator*.so)")
        if a.cmd == "anchor":
            anchor(a.builds, a.rounds, a.calls)
        else:
            print(json.dumps(anchor_times(a.builds[0], a.calls)))
        return
    for f in [a.graph, *a.builds] if a.cmd != "record" else []:
        if not f.is_file():
            ap.error(f"{f}: no such file (record the graph first; copy each build's _simulator*.so)")
    if a.cmd == "record":
        record(a.graph, a.n, a.degree, a.kernel)
    elif a.cmd == "run":
        rates = run(a.graph, a.builds[0], a.repeat, a.engine)
        print(json.dumps(rates) if a.json else " ".join(f"{x:.1f}" for x in rates))
    else:
        compare(a.graph, a.builds, a.rounds, a.repeat, a.engine)


if __name__ == "__main__":
    main()
