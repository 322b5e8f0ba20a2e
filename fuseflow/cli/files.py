"""``fuseflow compile``, ``simulate``, ``report`` and ``ops``: MLIR and result files, the op table."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from fuseflow.cli.common import (
    add_engine_arg,
    add_example_file_args,
    add_pass_args,
    compile_example,
    first_diagnostic,
    print_table,
)
from fuseflow.errors import FuseflowError


def cmd_report(a) -> int:
    """``fuseflow report``: a result JSON as a table, a Graphviz graph or a Perfetto trace."""
    from rich.console import Console  # lazily: the CLI starts without loading what a command does not use

    from fuseflow.report.render import (  # lazily: the CLI starts without loading what a command does not use
        dot,
        perfetto,
        table,
    )

    p = Path(a.result)
    if not p.exists():
        raise FuseflowError(f"{a.result}: no such file")
    try:
        result = json.loads(p.read_text())
        _ = result["regions"], result["total_cycles"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise FuseflowError(f"{a.result}: not a fuseflow result (write one with `fuseflow run --save`)") from None
    console = Console()
    for t in table(result, nodes=a.nodes):
        console.print(t)
    if a.trace:
        Path(a.trace).write_text(json.dumps(perfetto(result)))
        print(f"wrote {a.trace} (open in ui.perfetto.dev or chrome://tracing)")
    if a.dot:
        Path(a.dot).write_text(dot(result))
        print(f"wrote {a.dot} (render with: dot -Tsvg {a.dot} -o graph.svg)")
    return 0


def cmd_compile(a) -> int:
    """``fuseflow compile -o DIR``: the linalg and sam files, and every input and weight as
    `simulate --data` reads it."""
    prog = compile_example(a)
    out = Path(a.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(a.model).stem
    (out / f"{stem}.linalg.mlir").write_text(prog.mlir("linalg"))
    (out / f"{stem}.sam.mlir").write_text(prog.mlir("sam"))
    n_data = write_data(prog.bind(prog.example_args), out)
    print(prog.ops())
    print(prog.regions())
    print(
        f"wrote {out / (stem + '.linalg.mlir')}, {out / (stem + '.sam.mlir')} and {n_data} input and weight "
        f"files (fuseflow simulate {out / (stem + '.sam.mlir')} --data {out})"
    )
    return 0


def write_data(values, out: Path) -> int:
    """Every model input and parameter as `fuseflow simulate --data` reads them: NAME.npy (dense)
    or NAME.npz (a scipy sparse matrix, kept sparse). Returns how many files were written."""
    import numpy as np  # lazily: the CLI starts without loading what a command does not use
    import scipy.sparse as sp  # lazily: the CLI starts without loading what a command does not use

    for name, v in values.items():
        if sp.issparse(v) and v.ndim == 2:
            sp.save_npz(out / f"{name}.npz", sp.csr_matrix(v))
        else:
            dense = v.toarray() if sp.issparse(v) else np.asarray(v)
            np.save(out / f"{name}.npy", dense.astype(np.float32))
    return len(values)


def cmd_simulate(a) -> int:
    """``fuseflow simulate FILE.sam.mlir --data DIR``: run sam files without the model."""
    import numpy as np  # lazily: the CLI starts without loading what a command does not use
    import scipy.sparse as sp  # lazily: the CLI starts without loading what a command does not use

    from fuseflow.dialects.sam import new_context  # lazily: the CLI starts without loading what a command does not use
    from fuseflow.mlir import MLIRError, ir  # lazily: the CLI starts without loading what a command does not use
    from fuseflow.progress import (  # lazily: the CLI starts without loading what a command does not use
        progress_reporter,  # lazily: the CLI starts without loading what a command does not use
    )
    from fuseflow.sim.arch import Arch  # lazily: the CLI starts without loading what a command does not use
    from fuseflow.sim.graph import (  # lazily: the CLI starts without loading what a command does not use
        parse_graphs,
        run_graph,
    )

    path = Path(a.file)
    if not path.exists():
        raise FuseflowError(f"{a.file}: no such file")
    with new_context():
        try:
            module = ir.Module.parse(path.read_text())
        except MLIRError as e:
            raise first_diagnostic(str(e), a.file) from None
        graphs, outs = parse_graphs(module)
    env = {}
    if a.data:
        d = Path(a.data)
        if not d.is_dir():
            raise FuseflowError(f"{a.data}: not a directory")
        for f in d.iterdir():
            if f.suffix == ".npy":
                env[f.stem] = np.load(f)
            elif f.suffix == ".npz":
                env[f.stem] = sp.load_npz(f)  # packed from its own arrays, never densified
    arch = Arch.resolve(a.arch)
    rows: list[list] = []
    result: dict[str, Any] = {"regions": [], "outputs": {}}
    with progress_reporter(sys.stderr.isatty() or None) as report:
        for g in graphs:
            cb = (lambda cycle, name=g.name: report(name, cycle)) if report else None
            run = run_graph(g, env, arch, progress=cb, engine=a.engine)
            env.update(run.outputs)
            rows.append([g.name, run.cycles])
            result["regions"].append({"name": g.name, "cycles": run.cycles, "engine": run.engine})
    result["total_cycles"] = sum(r["cycles"] for r in result["regions"])
    if a.output_dir:
        od = Path(a.output_dir)
        od.mkdir(parents=True, exist_ok=True)
        for n in outs:
            np.save(od / f"{n}.npy", env[n])
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(str(path.name), rows + [["total", result["total_cycles"]]], ["region", "cycles"])
    return 0


def cmd_ops(a) -> int:
    """The supported-op table and the formats (docs/ops.md is `--markdown`)."""
    from fuseflow.formats import FORMAT_DOCS  # lazily: the CLI starts without loading what a command does not use
    from fuseflow.frontend.ops import (  # lazily: the CLI starts without loading what a command does not use
        SUPPORTED,
        markdown,
    )

    if a.markdown:
        print(markdown(), end="")
        return 0
    print_table(
        "supported ops (as exported, after decomposition)",
        [[s.name, s.kind, s.example] for s in SUPPORTED],
        ["op", "kind", "example"],
    )
    print_table("formats", [list(f) for f in FORMAT_DOCS], ["format", "meaning"])
    return 0


def register_ops(sub) -> None:
    """The ``ops`` command's flags."""
    ops = sub.add_parser("ops", help="list the supported PyTorch ops and sparse formats")
    ops.add_argument("--markdown", action="store_true", help="print docs/ops.md")
    ops.set_defaults(fn=cmd_ops)


def register_report(sub) -> None:
    """The ``report`` command's flags."""
    rp = sub.add_parser("report", help="tables, a Perfetto trace and a DOT graph from a saved result")
    rp.add_argument("result", help="JSON written by `fuseflow run --save`")
    rp.add_argument("--nodes", action="store_true", help="also print per-node counters")
    rp.add_argument("--trace", metavar="FILE", help="write Chrome/Perfetto trace JSON")
    rp.add_argument("--dot", metavar="FILE", help="write the annotated dataflow graph as DOT")
    rp.set_defaults(fn=cmd_report)


def register_compile(sub) -> None:
    """The ``compile`` command's flags."""
    c = sub.add_parser("compile", help="write the linalg and sam modules of a model file")
    add_example_file_args(c)
    c.add_argument("--schedule", default="unfused")
    c.add_argument("--arch", default="comal", help="the machine order=auto and schedule=auto rank for")
    add_pass_args(c)
    c.add_argument("-o", "--output-dir", default=".")
    c.set_defaults(fn=cmd_compile)


def register_simulate(sub) -> None:
    """The ``simulate`` command's flags."""
    s = sub.add_parser("simulate", help="simulate a sam .mlir file on data from a directory")
    s.add_argument("file")
    s.add_argument("--data", help="directory of NAME.npy (dense) or NAME.npz (scipy sparse) inputs")
    s.add_argument("--arch", default="comal")
    s.add_argument("--json", action="store_true")
    s.add_argument("-o", "--output-dir", help="write outputs as NAME.npy here")
    add_engine_arg(s)
    s.set_defaults(fn=cmd_simulate)
