"""Index notation: the compiler's tensor-algebra IR between linalg and sam (pure Python, no MLIR).

A region output is ``out(vars) = expr`` (`Assign`); expressions are tensor accesses, constants,
elementwise calls (named as sam.alu ops) and reductions. `fuseflow.conversion.linalg_to_index`
builds them, the analyses in this package (absent values, alpha sharing, loop nests, order
search) read them, and `fuseflow.conversion.index_to_sam` lowers them.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuseflow.primitives import ALU

UNIT = "_"  # the variable of a size-1 dimension: never iterated (a dense level of one element)


@dataclass(frozen=True)
class Access:
    """Tensor `tensor` read at `vars` (one per tensor mode, in mode order); `use` keeps views apart."""

    tensor: str
    vars: tuple[str, ...]
    use: int


@dataclass(frozen=True)
class Const:
    """A constant leaf of an expression."""

    value: float


class _HashedOnce:
    """A node's hash, computed once: a fused decoder's expressions are DAGs thousands of nodes
    deep, and a frozen dataclass hashes its whole subtree on every dict lookup. The cached
    hash is left out of pickles (string hashes differ between processes)."""

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(tuple(getattr(self, f) for f in self.__dataclass_fields__))  # type: ignore[attr-defined]
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}


@dataclass(frozen=True)
class Call(_HashedOnce):
    """An elementwise ALU op (sam.alu names: add, sub, mul, div, max, min, exp, relu, ...)."""

    op: str
    args: tuple[Expr, ...]

    __hash__ = _HashedOnce.__hash__


@dataclass(frozen=True)
class Reduce(_HashedOnce):
    """Reduction (sum or max) of `body` over `vars`."""

    kind: str
    vars: tuple[str, ...]
    body: Expr

    __hash__ = _HashedOnce.__hash__


Expr = Access | Const | Call | Reduce


@dataclass
class Assign:
    """``out(vars) = expr``: one region output in index notation."""

    out: str
    vars: tuple[str, ...]
    expr: Expr
    dims: dict[str, int]
    loc: str | None


def fold(op: str, args: tuple[float, ...]) -> float:
    """The value of `op` on constant arguments (the simulator's ALU semantics, `primitives.ALU`)."""
    return ALU[op].fold(args)


COMMUTATIVE = frozenset(name for name, op in ALU.items() if op.commutative)
"""Binary ops whose operands may be swapped."""


def preserves_zero(op: str) -> bool:
    """Whether a unary op maps 0 to 0 (its result is as sparse as its operand)."""
    return op in ALU and ALU[op].preserves_zero


def call(op: str, *args: Expr) -> Expr:
    """`op` applied to `args`, folded to a constant when every argument is one."""
    consts = [a for a in args if isinstance(a, Const)]
    if len(consts) == len(args):
        return Const(fold(op, tuple(a.value for a in consts)))
    return Call(op, tuple(args))


def accesses(e: Expr, seen: set[int] | None = None) -> list[Access]:
    """Every tensor access of `e`, in evaluation order; with `seen` (ids of nodes walked, shared
    across calls), each DAG node once: those met again were listed already."""
    if seen is not None:
        if id(e) in seen:
            return []
        seen.add(id(e))
    if isinstance(e, Access):
        return [e]
    if isinstance(e, Call):
        return [a for x in e.args for a in accesses(x, seen)]
    if isinstance(e, Reduce):
        return accesses(e.body, seen)
    return []


def render(e: Expr) -> str:
    """Readable form, e.g. ``sum_j(A(i,j) * x(j))``."""
    if isinstance(e, Access):
        return f"{e.tensor}({','.join(e.vars)})"
    if isinstance(e, Const):
        return f"{e.value:g}"
    if isinstance(e, Reduce):
        return f"{e.kind}_{''.join(e.vars)}({render(e.body)})"
    sym = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
    if e.op in sym and len(e.args) == 2:
        return f"({render(e.args[0])} {sym[e.op]} {render(e.args[1])})"
    return f"{e.op}({', '.join(render(a) for a in e.args)})"
