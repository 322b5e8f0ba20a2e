"""Differential fuzzing: random sparse programs x formats x schedules x orders vs eager PyTorch.

``python -m fuseflow.fuzz --cases 10000`` draws programs (einsum chains, elementwise mixes,
row reductions, softmax and masked softmax, sparse activations, transposes, slices,
identical blocks with their own parameters repeated in an ``nn.ModuleList``,
concatenations, reshapes into heads, full sums, pass-through outputs) over random
integer-valued sparse inputs of ranks 1-4 (leading batch dims, size-1 and size-0 dims,
all-zero inputs) in random storage: named formats, per-level
lists in any arrangement, and torch's own layouts (COO, hybrid COO, CSR/CSC, batched and
hybrid CSR); it compiles each under a random schedule and order, simulates it and compares
with eager PyTorch (`SimResult.check`, its default tolerance). A wrong answer, a crash, a
deadlock or an internal error is a failure; hypothesis then shrinks it to a minimal case,
written as a model file that ``fuseflow run FILE`` reproduces. An `UnsupportedError` the
compiler raises on purpose is counted, not failed, and so is a model eager PyTorch cannot run.

Cases are generated as Python source, so a reproducer is an ordinary model file.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import sys
import time
import traceback
import types
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fuseflow
from fuseflow.fuzz_messages import edge_cases

OPS = (
    "matmul",
    "mul",
    "add",
    "sub",
    "relu",
    "scale",
    "exp",
    "rowsum",
    "rowmax",
    "softmax",
    "masked_softmax",
    "sparsify_matmul",
    "transpose",
    "slice",
    "cat",
    "split_heads",
)
UNARY = {  # ops that keep the running tensor's shape and read nothing else
    "relu": "torch.relu(h)",
    "scale": "h * 0.5",
    "exp": "torch.exp(h * 0.1)",
    "rowsum": "h + h.sum(dim=-1, keepdim=True)",
    "rowmax": "h - torch.amax(h, dim=-1, keepdim=True)",
    "softmax": "torch.softmax(h, dim=-1)",
}
BLOCK_OPS = {  # a repeated block's statements over `h`, each reading at most one parameter of its own
    "linear": ("h = h @ self.w{i}", "square"),
    "gain": ("h = h * self.w{i}", "row"),
    "relu": ("h = torch.relu(h)", None),
    "scale": ("h = h * 0.5", None),
    "exp": ("h = torch.exp(h * 0.1)", None),
    "rowsum": ("h = h + h.sum(dim=-1, keepdim=True)", None),
    "softmax": ("h = torch.softmax(h, dim=-1)", None),
}
"""Ops of the identical blocks a case may end in (`Case.repeat` copies in an `nn.ModuleList`):
shape-preserving, so the copies chain, each with its own parameters (the frontend exports and
lowers one block and copies it, `frontend/replicate.py`)."""
FORMATS = ("dense", "csr", "csc", "dcsr", "dcsc", "coo")
"""The named formats of 2-D inputs (`storage_choices` lists every choice at every rank)."""
TORCH_LAYOUTS = {  # how build() converts a dense input (`_same_batches`: torch's batched CSR rule)
    "torch:coo": "{t}.to_sparse()",
    "torch:hybrid-coo": "{t}.to_sparse(sparse_dim={t}.dim() - 1)",
    "torch:csr": "_same_batches({t}).to_sparse_csr()",
    "torch:csc": "_same_batches({t}).to_sparse_csc()",
    "torch:hybrid-csr": "{t}.to_sparse_csr(dense_dim=1)",
}


def storage_choices(rank: int) -> list:
    """Every storage an input of `rank` can be given: dense first (hypothesis shrinks to it)."""

    out: list = ["dense"]
    if rank == 1:
        out.append("compressed")
    if rank >= 2:
        out += list(FORMATS[1:])
    out += [list(k) for k in itertools.product(("dense", "compressed"), repeat=rank) if "compressed" in k]
    out.append("torch:coo")
    if rank >= 2:
        out += ["torch:hybrid-coo", "torch:csr", "torch:csc"]
    # torch:hybrid-csr is not drawn: eager `hybrid CSR + dense` crashes torch 2.13 (a general
    # protection fault in libtorch, docs/dependencies.md), which would end the fuzzing process;
    # tests/e2e/test_layout_sweep.py covers hybrid CSR/CSC inputs
    return out


SCHEDULES = ("unfused", "layer", "full", "op")
ORDERS = ("auto", "plain", "0")


@dataclass
class Case:
    """One random program: ops over a running (rows x cols) tensor, its inputs and how to compile it."""

    ops: list[str]
    rows: int
    cols: int
    widths: list[int]  # output width of each matmul, in order
    densities: list[float]  # per input (x first), fraction of nonzeros
    formats: list  # per input: a name, or an int picking from `storage_choices` of its rank
    final_sum: bool
    schedule: str
    order: str
    seed: int
    lead: tuple[int, ...] = ()  # leading (batch) dims of every same-shaped tensor
    vector: bool = False  # rank 1: no row dimension
    passthrough: bool = False  # also return the input x unchanged
    empty: bool = False  # the row dimension has size 0
    blocks: list[str] = field(default_factory=list)  # a repeated block's ops (`BLOCK_OPS`)
    repeat: int = 0  # copies of that block after the ops (0: none)
    inputs: list[tuple[str, tuple[int, int], str]] = field(default_factory=list)  # (name, shape, kind)
    body: list[str] = field(default_factory=list)
    block_body: list[str] = field(default_factory=list)
    block_params: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._build()

    def _build(self) -> None:
        """Lay out the forward's statements and the inputs they read (shapes follow the ops)."""
        n, m = (0 if self.empty else self.rows), self.cols
        lead = tuple(self.lead)

        def shape(n, m):
            return lead + ((m,) if self.vector else (n, m))

        self.inputs = [("x", shape(n, m), "data")]
        self.body = ["h = x"]
        widths = iter(self.widths)

        def new(shape, kind="data"):
            name = f"w{len(self.inputs) - 1}" if kind == "data" else f"mask{len(self.inputs) - 1}"
            self.inputs.append((name, shape, kind))
            return name

        for op in self.ops:
            if op in ("matmul", "sparsify_matmul"):
                c = next(widths, 3)
                w = new((m, c))
                self.body.append(f"h = h @ {w}" if op == "matmul" else f"h = torch.relu(h).to_sparse_csr() @ {w}")
                m = c
            elif op in ("mul", "add", "sub"):
                w = new(shape(n, m))
                self.body.append(f"h = h {dict(mul='*', add='+', sub='-')[op]} {w}")
            elif op in UNARY:
                self.body.append(f"h = {UNARY[op]}")
            elif op == "masked_softmax":
                k = new(shape(n, m), "mask")
                self.body.append(f"h = torch.softmax(h.masked_fill({k} == 0, float('-inf')), dim=-1)")
            elif op == "transpose" and not self.vector:
                self.body.append("h = h.transpose(-1, -2)")
                n, m = m, n
            elif op == "slice" and m > 1:  # a narrow of the last dim (a region boundary before it)
                self.body.append(f"h = h[..., 1:{m}]")
                m -= 1
            elif op == "cat":  # concatenated with a scaled copy along the last dim
                self.body.append("h = torch.cat([h, h * 0.5], dim=-1)")
                m *= 2
            elif op == "split_heads" and m % 2 == 0 and m > 1:  # (.., m) -> (.., 2, m / 2), summed back
                self.body.append(f"h = h.reshape(*h.shape[:-1], 2, {m // 2}).sum(-2)")
                m //= 2
        self.block_body, self.block_params = [], []
        if self.repeat >= 2 and self.blocks:
            for i, op in enumerate(self.blocks):
                line, param = BLOCK_OPS[op]
                self.block_body.append(line.format(i=i))
                if param is not None:
                    self.block_params.append((f"w{i}", (m, m) if param == "square" else (m,)))
            self.body.append("for b in self.blocks: h = b(h)")
        if self.final_sum:
            self.body.append("h = h.sum()")

    def storage(self, i: int):
        """Input i's storage: a format name, a per-level list or a torch layout (``torch:...``)."""
        f = self.formats[i]
        if isinstance(f, int):
            choices = storage_choices(len(self.inputs[i][1]))
            return choices[f % len(choices)]
        return f

    def source(self) -> str:
        """A model file: `build()` returns (model, example args, formats); SCHEDULE and ORDER say how."""
        names = [nm for nm, _, _ in self.inputs]
        stores = [self.storage(i) for i in range(len(self.inputs))]
        fmts = {nm: f for (nm, _, _), f in zip(self.inputs, stores) if not str(f).startswith("torch:")}
        ret = "h, x" if self.passthrough else "h"
        lines = [
            f'"""fuseflow.fuzz case (seed {self.seed}): fuseflow run THIS_FILE --schedule {self.schedule}"""',
            "",
            "import torch",
            "",
            f"SCHEDULE = {self.schedule!r}",
            f"ORDER = {self.order!r}",
            "",
            "",
        ]
        if self.block_body:
            lines += [
                "class Block(torch.nn.Module):",
                "    def __init__(self, g):",
                "        super().__init__()",
                *[
                    f"        self.{nm} = torch.nn.Parameter("
                    f"torch.randint(-2, 3, {shape!r}, generator=g).float() * 0.5)"
                    for nm, shape in self.block_params
                ],
                "",
                "    def forward(self, h):",
                *[f"        {s}" for s in self.block_body],
                "        return h",
                "",
                "",
                "class Fuzzed(torch.nn.Module):",
                "    def __init__(self, g):",
                "        super().__init__()",
                f"        self.blocks = torch.nn.ModuleList(Block(g) for _ in range({self.repeat}))",
                "",
            ]
        else:
            lines.append("class Fuzzed(torch.nn.Module):")
        lines += [
            f"    def forward(self, {', '.join(names)}):",
            *[f"        {s}" for s in self.body],
            f"        return {ret}",
            "",
            "",
            "def _same_batches(t):",
            '    """torch\'s batched CSR needs as many nonzeros in every batch: repeat the first."""',
            "    if t.dim() <= 2 or t.numel() == 0:",
            "        return t",
            "    flat = t.reshape(-1, *t.shape[-2:])",
            "    return flat[:1].expand(flat.shape).reshape(t.shape).clone()",
            "",
            "",
            "def build():",
            f"    g = torch.Generator().manual_seed({self.seed})",
            "    args = []",
        ]
        for (_, shape, kind), dens, store in zip(self.inputs, self.densities, stores):
            dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
            if kind == "mask":
                lines += [
                    f"    m = (torch.rand(({dims}), generator=g) < {dens}).float()",
                    "    if m.shape[-1]:",
                    "        m[..., 0] = 1.0  # every row keeps one entry: a fully masked row is NaN",
                    "    args.append(m)",
                ]
            else:
                lines.append(
                    f"    t = torch.randint(-3, 4, ({dims}), generator=g).float()"
                    f" * (torch.rand(({dims}), generator=g) < {dens})"
                )
                conv = TORCH_LAYOUTS[store].format(t="t") if str(store).startswith("torch:") else "t"
                lines.append(f"    args.append({conv})")
        model = "Fuzzed(g)" if self.block_body else "Fuzzed()"
        lines += [f"    return {model}, tuple(args), {fmts!r}", ""]
        return "\n".join(lines)


def load(source: str):
    """The module a case's source defines (exec'd under a real file name for error locations)."""

    mod = types.ModuleType("fuzzed_case")
    mod.__file__ = "<fuseflow.fuzz case>"
    sys.modules[mod.__name__] = mod  # PyG's MessagePassing inspects its module's globals
    exec(compile(source, "fuzzed_case.py", "exec"), mod.__dict__)
    return mod


class Failure(Exception):
    """A case the compiler got wrong (not a deliberate UnsupportedError)."""


def run_case(case: Case) -> str:
    """Compile, simulate and check one case. Returns ``ok`` or ``unsupported: <why>``; raises
    `Failure` on a wrong answer, a crash or an internal error."""

    mod = load(case.source())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's beta notices about sparse layouts
            model, args, formats = mod.build()
    except RuntimeError as e:  # torch cannot build this layout (a CSR over a size-0 dim, say)
        return "torch cannot build the input: " + _kind(str(e))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a schedule rule matching nothing in a tiny program
            prog = fuseflow.compile(model, args, formats=formats, schedule=case.schedule, order=case.order)
    except fuseflow.EagerError as e:
        return "eager PyTorch fails: " + _kind(str(e).split("inputs: ", 1)[-1])
    except fuseflow.UnsupportedError as e:
        msg = str(e)
        if "internal" in msg:
            raise Failure(f"internal error: {msg}") from e
        return "unsupported: " + _kind(msg)
    except fuseflow.FuseflowError as e:
        raise Failure(f"compile failed: {e}") from e
    except Exception as e:  # a crash in the compiler is a bug whatever it is
        raise Failure(f"compile crashed: {type(e).__name__}: {e}\n{traceback.format_exc()}") from e
    try:
        prog.simulate().check()
    except fuseflow.FuseflowError as e:
        raise Failure(f"{type(e).__name__}: {e}") from e
    except Exception as e:
        raise Failure(f"simulate crashed: {type(e).__name__}: {e}\n{traceback.format_exc()}") from e
    return "ok"


def _kind(msg: str) -> str:
    """A short, stable label for an unsupported-input message (for the summary counts)."""
    text = msg.split("error: ", 1)[-1]
    for stop in (":", "(", ";"):
        text = text.split(stop)[0]
    return text.strip()[:70]


def cases():
    """The hypothesis strategy of cases (shrinks towards fewer ops, smaller shapes, dense, unfused)."""
    from hypothesis import strategies as st  # optional extra (test)

    @st.composite
    def draw_case(draw):
        ops = draw(st.lists(st.sampled_from(OPS), min_size=1, max_size=5))
        n_inputs = 1 + sum(op in ("matmul", "sparsify_matmul", "mul", "add", "sub", "masked_softmax") for op in ops)
        nd = draw(st.booleans())  # N-D shapes and torch layouts (False: the 2-D programs, named formats)
        return Case(
            ops=ops,
            rows=draw(st.integers(1, 6)),
            cols=draw(st.integers(1, 6)),
            widths=draw(st.lists(st.integers(1, 6), min_size=len(ops), max_size=len(ops))),
            densities=draw(st.lists(st.sampled_from([1.0, 0.5, 0.2, 0.0]), min_size=n_inputs, max_size=n_inputs)),
            formats=draw(
                st.lists(st.integers(0, 40), min_size=n_inputs, max_size=n_inputs)
                if nd
                else st.lists(st.sampled_from(FORMATS), min_size=n_inputs, max_size=n_inputs)
            ),
            final_sum=draw(st.booleans()),
            schedule=draw(st.sampled_from(SCHEDULES)),
            order=draw(st.sampled_from(ORDERS)),
            seed=draw(st.integers(0, 2**16)),
            lead=tuple(draw(st.lists(st.integers(1, 3), max_size=2))) if nd else (),
            vector=draw(st.booleans()) if nd else False,
            passthrough=draw(st.booleans()),
            empty=draw(st.sampled_from([False] * 7 + [True])) if nd else False,  # a size-0 row dim: refused
            blocks=draw(st.lists(st.sampled_from(sorted(BLOCK_OPS)), min_size=1, max_size=3)),
            repeat=draw(st.sampled_from([0, 0, 2, 3])),
        )

    return draw_case()


@dataclass
class Report:
    """A fuzz run's tally: cases tried, outcomes by kind, the first failure and its reproducer, the time."""

    cases: int = 0
    outcomes: Counter = field(default_factory=Counter)
    failure: str | None = None
    reproducer: Path | None = None
    seconds: float = 0.0


def run(
    n_cases: int,
    seed: int = 0,
    out: Path | None = Path("fuzz-failure.py"),
    check: Callable[[Case], str] = run_case,
    progress: Callable[[Report], None] | None = None,
    strategy: Any = None,
) -> Report:
    """Run `n_cases` random cases (`strategy`: another kind of case, such as
    `fuzz_messages.edge_cases()`; default `cases()`); on the first failure shrink it and write
    the reproducer to `out`."""
    from hypothesis import HealthCheck, Phase, given, settings  # optional extra (test)
    from hypothesis import seed as hseed  # optional extra (test)

    report = Report()
    last: list[tuple[Case, str]] = []
    start = time.perf_counter()

    @hseed(seed)
    @settings(
        max_examples=n_cases,
        deadline=None,
        database=None,
        derandomize=False,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(strategy if strategy is not None else cases())
    def one(case: Case) -> None:
        report.cases += 1
        try:
            outcome = check(case)
        except Failure as e:
            last.append((case, str(e)))
            report.outcomes["failed"] += 1
            raise
        report.outcomes[outcome] += 1
        if progress is not None and report.cases % 50 == 0:
            progress(report)

    try:
        one()
    except Failure:
        case, why = last[-1]  # hypothesis re-runs the shrunk case last
        report.failure = why
        if out is not None:
            header = "".join(f"# {ln}\n" for ln in why.splitlines()[:20])
            out.write_text(header + case.source())
            report.reproducer = out
    report.seconds = time.perf_counter() - start
    return report


def main(argv: list[str] | None = None) -> int:
    """``python -m fuseflow.fuzz``: random programs and inputs, every accepted one checked against PyTorch."""
    p = argparse.ArgumentParser(prog="python -m fuseflow.fuzz", description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=200, help="random cases to try (default 200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", default="fuzz-failure.py", help="where the shrunk reproducer goes")
    p.add_argument(
        "--messages", action="store_true", help="message passing with edge values instead (needs the pyg extra)"
    )
    a = p.parse_args(argv)
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        print("fuseflow.fuzz: needs hypothesis (pip install 'fuseflow[test]')", file=sys.stderr)
        return 2

    def show(r: Report) -> None:
        print(f"  {r.cases} cases, {r.outcomes['ok']} ok, {r.outcomes['failed']} failed", file=sys.stderr, flush=True)

    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)  # torch.export's own traces
    print(f"fuseflow.fuzz: {a.cases} cases, seed {a.seed}", flush=True)
    strategy = None
    if a.messages:
        strategy = edge_cases()
    r = run(a.cases, a.seed, Path(a.output), progress=show, strategy=strategy)
    print(f"{r.cases} cases in {r.seconds:.0f} s (shrinking included)")
    for outcome, n in r.outcomes.most_common():
        print(f"  {n:6d}  {outcome}")
    if r.failure:
        print(f"FAILED: {r.failure.splitlines()[0]}")
        print(f"minimal reproducer: {r.reproducer} (fuseflow run {r.reproducer})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
