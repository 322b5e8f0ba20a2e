"""Index notation: the compiler's tensor-algebra IR between linalg and sam (pure Python, no MLIR).

A region output is ``out(vars) = expr`` (`Assign`); expressions are tensor accesses, constants,
elementwise calls (named as sam.alu ops) and reductions. `fuseflow.conversion.linalg_to_index`
builds them, the analyses in this package (absent values, alpha sharing, loop nests, order
search) read them, and `fuseflow.conversion.index_to_sam` lowers them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Call:
    """An elementwise ALU op (sam.alu names: add, sub, mul, div, max, min, exp, relu, ...)."""

    op: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Reduce:
    """Reduction (sum or max) of `body` over `vars`."""

    kind: str
    vars: tuple[str, ...]
    body: Expr


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
    """The value of `op` on constant arguments (the simulator's ALU semantics, for constant folding)."""
    a = args[0]
    b = args[1] if len(args) > 1 else 0.0
    table: dict[str, Callable[[], float]] = {
        "add": lambda: a + b,
        "sub": lambda: a - b,
        "mul": lambda: a * b,
        "div": lambda: a / b if b else (math.nan if a == 0 else math.copysign(math.inf, a)),
        "max": lambda: max(a, b),
        "min": lambda: min(a, b),
        "neg": lambda: -a,
        "relu": lambda: max(a, 0.0),
        "exp": lambda: math.exp(a),
        "sqrt": lambda: math.sqrt(a) if a >= 0 else math.nan,
        "rsqrt": lambda: 1 / math.sqrt(a) if a > 0 else math.inf,
        "tanh": lambda: math.tanh(a),
        "abs": lambda: abs(a),
        "erf": lambda: math.erf(a),
        "eqz": lambda: 1.0 if a == 0 else 0.0,
        "nez": lambda: 0.0 if a == 0 else 1.0,
        "log": lambda: math.log(a) if a > 0 else (-math.inf if a == 0 else math.nan),
        "mask": lambda: a if b != 0 else -math.inf,
    }
    return table[op]()


COMMUTATIVE = frozenset({"add", "mul", "max", "min"})
"""Binary ops whose operands may be swapped."""


def preserves_zero(op: str) -> bool:
    """Whether a unary op maps 0 to 0 (its result is as sparse as its operand), read off its
    semantics (`fold`), so no list of such ops can drift from them (``erf`` did)."""
    try:
        return fold(op, (0.0,)) == 0.0
    except (KeyError, ValueError, OverflowError, ZeroDivisionError):
        return False


def call(op: str, *args: Expr) -> Expr:
    """`op` applied to `args`, folded to a constant when every argument is one."""
    consts = [a for a in args if isinstance(a, Const)]
    if len(consts) == len(args):
        return Const(fold(op, tuple(a.value for a in consts)))
    return Call(op, tuple(args))


def accesses(e: Expr) -> list[Access]:
    """Every tensor access of `e`, in evaluation order."""
    if isinstance(e, Access):
        return [e]
    if isinstance(e, Call):
        return [a for x in e.args for a in accesses(x)]
    if isinstance(e, Reduce):
        return accesses(e.body)
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
