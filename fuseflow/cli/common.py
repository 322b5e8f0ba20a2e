"""What every ``fuseflow`` command shares: loading a model file and its build() options, tables,
JSON output, and the argument groups (model, passes, engine, simulation shortcuts)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fuseflow.errors import FuseflowError
from fuseflow.model_files import build_from_file


def option_dict(pairs: list[str] | None) -> dict:
    """``-O NAME=VALUE`` pairs as a dict, values read as JSON where they parse (else strings)."""
    out = {}
    for item in pairs or []:
        if "=" not in item:
            raise FuseflowError(f"option {item!r} must be NAME=VALUE")
        k, v = item.split("=", 1)
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def build_model(path: str, a) -> tuple:
    """The model file's module and what its build() returns for the options of `a`."""
    opts = option_dict(getattr(a, "option", None))
    if getattr(a, "graph", None):
        opts["graph"] = a.graph
    return build_from_file(path, opts)


def load_example(path: str, a=None):
    """What the model file's `build()` returns, for the options of `a` (none: its defaults)."""
    return build_model(path, a)[1]


def compile_example(a):
    """The model file of `a` compiled as its flags say (schedule, order, pipeline, arch)."""
    import fuseflow  # lazily: the CLI starts without loading what a command does not use

    model, args, formats = load_example(a.model, a)
    return fuseflow.compile(
        model,
        args,
        formats=formats,
        schedule=a.schedule,
        order=a.order,
        passes=a.pipeline,
        arch=getattr(a, "arch", None),
        max_lanes=getattr(a, "max_lanes", None),
        max_block=getattr(a, "max_block", None),
        strategy=getattr(a, "strategy", None),  # schedule=auto plans for the strategy the run uses
    )


def print_table(title: str, rows: list[list], headers: list[str]) -> None:
    """Print `rows` as a rich table."""
    from rich.console import Console  # lazily: the CLI starts without loading what a command does not use
    from rich.table import Table  # lazily: the CLI starts without loading what a command does not use

    t = Table(title=title)
    for i, h in enumerate(headers):
        t.add_column(h, justify="left" if i == 0 else "right", no_wrap=True)
    for r in rows:
        t.add_row(*[str(x) for x in r])
    Console(width=200).print(t)


def write_json(result: dict, a) -> bool:
    """Write `result` to `-o FILE` if given; print it and return True under `--json`."""
    if a.output:
        Path(a.output).write_text(json.dumps(result, indent=2))
    if a.json:
        print(json.dumps(result, indent=2))
    return bool(a.json)


def csv_list(text: str | None, kind=str) -> list:
    """A comma-separated list, each item converted by `kind`."""
    if text is None:
        return []
    out = []
    for item in text.split(","):
        item = item.strip()
        try:
            out.append(kind(item) if item or kind is str else kind(0))
        except ValueError:
            raise FuseflowError(f"expected a comma-separated list of {kind.__name__}s, got {text!r}") from None
    return out


def first_diagnostic(text: str, file: str) -> FuseflowError:
    """The first MLIR diagnostic as a located error (``file:line:col: error: message``)."""
    import re  # lazily: the CLI starts without loading what a command does not use

    m = re.search(r'"-":(\d+):(\d+): (?:error: )?(.*)', text)
    if m:
        return FuseflowError(m.group(3).strip(), f"{file}:{m.group(1)}:{m.group(2)}")
    return FuseflowError(text.splitlines()[0] if text else "malformed input")


def add_engine_arg(p: argparse.ArgumentParser) -> None:
    """The ``--engine`` flag every simulating command takes."""
    from fuseflow.sim.graph import ENGINES  # lazily: the CLI starts without loading what a command does not use

    p.add_argument(
        "--engine",
        default="auto",
        choices=ENGINES,
        help="simulation engine (same results): auto runs the window engine when FIFOs are deep and memory "
        "is off, and hands the run to the event engine where a FIFO could fill",
    )


def add_shortcut_args(p: argparse.ArgumentParser) -> None:
    """Simulation shortcuts that never change a cycle (sim/memo.py, Program.simulate)."""
    p.add_argument(
        "--memo",
        nargs="?",
        const=True,
        default=None,
        metavar="DIR",
        help="simulate structurally identical regions once (values from their index notation); "
        "DIR keeps the memo on disk for later runs",
    )
    p.add_argument("--jobs", type=int, default=1, help="regions simulated at once in worker processes")


def add_sample_arg(p: argparse.ArgumentParser) -> None:
    """``--sample``: estimate large row-local regions from sampled units, with an interval."""
    p.add_argument(
        "--sample",
        nargs="?",
        const="2%@95%",
        default=None,
        metavar="ERROR[@CONF]",
        help="sampled simulation (docs/sampling.md): each large row-local region estimated from a sample of "
        "its row units to within ERROR at confidence CONF (default 2%%@95%%); figures are marked with their interval",
    )


def add_pieces_args(p: argparse.ArgumentParser) -> None:
    """``--pieces`` and ``--checkpoint``: exact runs of large graphs in pieces, resumable."""
    p.add_argument(
        "--pieces",
        type=pieces_arg,
        metavar="N|NODE,...",
        help="run each region's graph in N pieces (or pieces starting at the named nodes), each replaying the "
        "streams recorded by the pieces before it: exact, with the memory of the largest piece (docs/pieces.md)",
    )
    p.add_argument(
        "--checkpoint",
        metavar="DIR",
        help="keep every finished piece (without --pieces, every region) in DIR; `fuseflow resume DIR` (or the same "
        "command again) resumes after the last one",
    )
    p.add_argument(
        "--every",
        metavar="TIME",
        help="with --checkpoint: also save a running piece's state this often (90s, 10m, 2h): a stopped run "
        "continues from its last state (the window engine: memory model off)",
    )


def pieces_arg(text: str) -> int | list[str]:
    """``3`` -> 3; ``a,b`` -> ["a", "b"] (the nodes that start a piece)."""
    return int(text) if text.strip().isdigit() else [t.strip() for t in text.split(",") if t.strip()]


def add_pass_args(p: argparse.ArgumentParser) -> None:
    """The ``--order`` and ``--pipeline`` flags every compiling command takes."""
    p.add_argument(
        "--order", help="dataflow order of every region: auto (default, by the cycle model) | plain | K | i,k,j"
    )
    p.add_argument("--pipeline", help="fuseflow passes after partitioning, e.g. 'fuseflow-order{order=auto}'")
    p.add_argument(
        "--max-lanes", type=int, help="with --schedule auto on a finite fabric: the most lanes a region gets (16)"
    )
    p.add_argument(
        "--max-block",
        type=int,
        help="with --schedule auto on a finite fabric: the largest b x b blocks a region gets (16; 1: none)",
    )


STRATEGY_HELP = (
    "how regions share the fabric: sequential (default), concurrent (side by side when they fit), "
    "pipeline:K[:rows] (K micro-batches of equal work, or equal rows, pipelined across regions), "
    "auto (the best of these by the cycle model, confirmed by simulation), "
    "or FILE.py:Class (a fuseflow.Strategy subclass)"
)


def add_example_file_args(p: argparse.ArgumentParser) -> None:
    """The model file and what its build() takes: every command that builds an example."""
    p.add_argument("model", help="Python file defining build(**options) -> (model, example_args, formats)")
    p.add_argument("--graph", help="GNN examples: .npz, .mtx, edge list, or standin:NAME (examples/graphs.py)")
    p.add_argument("--option", "-O", action="append", metavar="NAME=VALUE", help="pass an option to build()")


def add_model_args(p: argparse.ArgumentParser) -> None:
    """What every command that compiles one model file takes."""
    add_example_file_args(p)
    p.add_argument("--schedule", default="unfused", help="unfused | layer | full | op | auto | FILE.json/.py (rules)")
    p.add_argument(
        "--arch",
        default="comal",
        help="preset (comal, sam, rda, amber) or TOML file: simulated, and what orders are ranked for",
    )
    p.add_argument(
        "--strategy",
        default="sequential",
        help=STRATEGY_HELP,
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--explain", action="store_true", help="with --schedule auto: what the planner weighed and why")
    add_pass_args(p)
