"""The ``fuseflow`` command: compile, simulate and run sparse models."""

from __future__ import annotations

import argparse
import os
import sys

from fuseflow.cli.common import (
    STRATEGY_HELP,
    add_engine_arg,
    add_example_file_args,
    add_model_args,
    add_pass_args,
    add_shortcut_args,
)
from fuseflow.cli.files import cmd_compile, cmd_ops, cmd_report, cmd_simulate
from fuseflow.cli.planning import cmd_dse, cmd_estimate, cmd_plan
from fuseflow.cli.runs import cmd_order_sweep, cmd_run, cmd_study
from fuseflow.errors import FuseflowError
from fuseflow.version import __version__


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fuseflow", description=__doc__)
    p.add_argument("--verbose", action="store_true", help="show torch-mlir's own diagnostics on stderr")
    p.add_argument("--version", action="version", version=f"fuseflow {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    ops = sub.add_parser("ops", help="list the supported PyTorch ops and sparse formats")
    ops.add_argument("--markdown", action="store_true", help="print docs/ops.md")
    ops.set_defaults(fn=cmd_ops)
    r = sub.add_parser("run", help="compile a model file, simulate it and check it against PyTorch")
    add_model_args(r)
    r.add_argument("--save", metavar="FILE", help="write the detailed result (per-node counters, spans) for `report`")
    r.add_argument("--estimate", action="store_true", help="print the cycle model's preview instead of simulating")
    r.add_argument("--timeline", metavar="FILE", help="draw the regions' timeline as a Gantt chart (.png or .svg)")
    add_engine_arg(r)
    add_shortcut_args(r)
    r.set_defaults(fn=cmd_run)
    d = sub.add_parser("dse", help="sweep schedules x orders x lanes x blocks x arch: rows, Parquet, Pareto plot")
    add_example_file_args(d)
    d.add_argument("--space", help="TOML space description ([dse] schedule/order/par/block/arch, arch_params)")
    d.add_argument("--schedule", help="comma-separated schedules (unfused,layer,full,auto,FILE.json)")
    d.add_argument("--order", help="comma-separated orders (auto,plain,...)")
    d.add_argument("--par", help="comma-separated level:factor lane settings ('' = none), e.g. ',i:2,i:4'")
    d.add_argument("--block", help="comma-separated block sizes (0 = none)")
    d.add_argument("--arch", help="comma-separated presets or TOML files")
    d.add_argument(
        "--strategy", help="comma-separated strategies (sequential,concurrent,pipeline:4,auto,FILE.py:Class)"
    )
    d.add_argument("--param", action="append", metavar="KEY=V1,V2", help="sweep an [arch] key, e.g. fifo_depth=16,1024")
    d.add_argument("--prune", action="store_true", help="estimate every point, simulate only the non-dominated")
    d.add_argument("--executor", default="local", choices=("local", "ray"))
    d.add_argument("--address", help="Ray cluster address (with --executor ray)")
    d.add_argument("--jobs", type=int, help="worker processes (default: all cores)")
    d.add_argument("--cache", help="finished-point cache directory (default ~/.cache/fuseflow/dse)")
    d.add_argument("--no-cache", action="store_true")
    d.add_argument("-o", "--output", help="write the rows as JSON")
    d.add_argument("--parquet", help="write the rows as Parquet (pip install 'fuseflow[parquet]')")
    d.add_argument("--plot", help="write the Pareto plot (.svg or .png)")
    d.add_argument("--json", action="store_true")
    d.set_defaults(fn=cmd_dse)
    pl = sub.add_parser("plan", help="find a fusion schedule (schedule=auto): candidates, estimates, the choice")
    add_example_file_args(pl)
    pl.add_argument("--arch", default="comal")
    pl.add_argument("--order", help="orders of the finalists' regions: auto (default) | plain")
    pl.add_argument("--top-k", type=int, help="finalists simulated to confirm (default: 1 per 20 candidates, 1-3)")
    pl.add_argument("--strategy", default="sequential", help="the finalists run under it: " + STRATEGY_HELP)
    pl.add_argument("--json", action="store_true")
    pl.add_argument("-o", "--output", help="save the chosen schedule (.json or .py) for --schedule FILE")
    pl.set_defaults(fn=cmd_plan)
    e = sub.add_parser("estimate", help="predict cycles, tokens, ALU ops and bytes per region without simulating")
    add_model_args(e)
    e.add_argument("--nodes", action="store_true", help="also predicted tokens and busy cycles per node")
    e.set_defaults(fn=cmd_estimate)
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
    st.set_defaults(fn=cmd_study)
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

    rp = sub.add_parser("report", help="tables, a Perfetto trace and a DOT graph from a saved result")
    rp.add_argument("result", help="JSON written by `fuseflow run --save`")
    rp.add_argument("--nodes", action="store_true", help="also print per-node counters")
    rp.add_argument("--trace", metavar="FILE", help="write Chrome/Perfetto trace JSON")
    rp.add_argument("--dot", metavar="FILE", help="write the annotated dataflow graph as DOT")
    rp.set_defaults(fn=cmd_report)
    c = sub.add_parser("compile", help="write the linalg and sam modules of a model file")
    add_example_file_args(c)
    c.add_argument("--schedule", default="unfused")
    c.add_argument("--arch", default="comal", help="the machine order=auto and schedule=auto rank for")
    add_pass_args(c)
    c.add_argument("-o", "--output-dir", default=".")
    c.set_defaults(fn=cmd_compile)
    s = sub.add_parser("simulate", help="simulate a sam .mlir file on data from a directory")
    s.add_argument("file")
    s.add_argument("--data", help="directory of NAME.npy (dense) or NAME.npz (scipy sparse) inputs")
    s.add_argument("--arch", default="comal")
    s.add_argument("--json", action="store_true")
    s.add_argument("-o", "--output-dir", help="write outputs as NAME.npy here")
    add_engine_arg(s)
    s.set_defaults(fn=cmd_simulate)
    return p


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TMPDIR", os.path.join(os.getcwd(), "build", "tmp"))
    os.makedirs(os.environ["TMPDIR"], exist_ok=True)
    a = parser().parse_args(argv)
    if a.verbose:
        os.environ["FUSEFLOW_VERBOSE"] = "1"  # torch-mlir's own diagnostics go to stderr
    import warnings

    def one_line(message, category, filename, lineno, file=None, line=None):
        print(f"fuseflow: warning: {message}", file=sys.stderr)

    warnings.showwarning = one_line
    # torch's own notices about its sparse support and dependencies' deprecations are not the user's business
    warnings.filterwarnings("ignore", message=r"Sparse (CSR|BSR|BSC) tensor support is in beta state")
    warnings.filterwarnings("ignore", message=r"Sparse invariant checks are implicitly disabled")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    try:
        return a.fn(a)
    except FuseflowError as e:
        print(f"fuseflow: {e}" if not e.location else str(e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
