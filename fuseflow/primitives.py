"""The one table of sam primitives, ALU ops and architecture settings, as the C++ simulator defines it.

Kinds (sam op mnemonics), ALU ops and `[arch]` keys are declared once, in the simulator
(`node.cpp: kPrimitives`, `alu_ops.h: kAluOps`, `timing.h: kArchKeys`), and read here through
the bindings. The dialect's ALU verifier, the architecture's keys (`sim/arch.py`), the simulator
front end and the cycle model take them from this module; `tests/unit/test_primitive_table.py`
checks that they agree.

Each ALU op's Python description (`ALU`) is here too: its numpy semantics, from which constant
folding, zero preservation and the values evaluator all read, whether it commutes, and how it
propagates sparsity. `tests/unit/test_alu_semantics.py` checks the semantics against the
simulator's own `apply` on every op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.special

import fuseflow._simulator as _simulator

KINDS: tuple[str, ...] = tuple(_simulator.primitive_kinds())
"""Every primitive kind the simulator builds."""
ALU_OPS: dict[str, bool] = dict(_simulator.alu_ops())
"""ALU op name -> whether it is unary."""
ALU_UNARY: tuple[str, ...] = tuple(n for n, unary in ALU_OPS.items() if unary)
ALU_BINARY: tuple[str, ...] = tuple(n for n, unary in ALU_OPS.items() if not unary)
ARCH_KEYS: dict[str, dict[str, str]] = {k: dict(v) for k, v in _simulator.arch_keys().items()}
"""``{"arch": {key: type}, "kinds": {...}, "memory": {...}}``; types: int (positive), uint, bool, table."""
RESOURCE: dict[str, str] = dict(_simulator.primitive_resources())
"""Primitive kind -> the fabric resource class of the unit that holds one (``memory`` or ``compute``)."""


@dataclass(frozen=True)
class AluOp:
    """One ALU op as Python sees it: the simulator's semantics (`alu_ops.h: apply`) in numpy, and
    the facts the compiler reads off it."""

    name: str
    array: Callable[..., Any]
    """The op on numpy operands (float32 arrays in the values evaluator, float64 scalars when folding)."""
    sparsity: str = "dense"
    """Where the result is zero, given the operands' zeros: ``product`` (where any operand is),
    ``union`` (where every operand is), ``first`` (where the first operand is), ``dense`` (not
    known). A unary op that maps 0 to 0 is ``first`` whatever is written here (`preserves_zero`)."""
    commutative: bool = False

    @property
    def unary(self) -> bool:
        """Whether the simulator applies it to one operand."""
        return ALU_OPS[self.name]

    @property
    def preserves_zero(self) -> bool:
        """Whether a unary op maps 0 to 0 (its result is as sparse as its operand), read off the
        semantics so that no list of such ops can drift from them."""
        return self.unary and self.fold((0.0,)) == 0.0

    @property
    def zeros(self) -> str:
        """`sparsity`, with a zero-preserving unary op's ``first``."""
        return "first" if self.preserves_zero else self.sparsity

    def fold(self, args: tuple[float, ...]) -> float:
        """The op on constant operands, in float64 (constant folding; the result is printed as f32)."""
        a = np.float64(args[0])
        b = np.float64(args[1] if len(args) > 1 else 0.0)
        with np.errstate(all="ignore"):
            return float(self.array(a) if self.unary else self.array(a, b))


def _where(cond: Any, x: Any, y: float) -> Any:
    return np.where(cond, x, np.asarray(y, dtype=np.result_type(x)))


_OPS = (
    AluOp("add", np.add, "union", commutative=True),
    AluOp("sub", np.subtract, "union"),
    AluOp("mul", np.multiply, "product", commutative=True),
    AluOp("div", np.divide, "first"),
    AluOp("max", np.maximum, "union", commutative=True),  # NaN propagates, as in the simulator
    AluOp("min", np.minimum, "union", commutative=True),
    AluOp("rsub", lambda a, b: b - a, "union"),
    AluOp("rdiv", lambda a, b: b / a),
    AluOp("mask", lambda a, m: _where(m != 0, a, -np.inf), "product"),  # -inf where m == 0
    AluOp("neg", np.negative),
    AluOp("relu", lambda a: _where(a > 0, a, 0.0)),
    AluOp("exp", np.exp),
    AluOp("sqrt", np.sqrt),
    AluOp("rsqrt", lambda a: 1 / np.sqrt(a)),
    AluOp("tanh", np.tanh),
    AluOp("abs", np.abs),
    AluOp("erf", scipy.special.erf),
    AluOp("eqz", lambda a: (a == 0).astype(a.dtype)),
    AluOp("nez", lambda a: (a != 0).astype(a.dtype)),
    AluOp("log", np.log),
)
ALU: dict[str, AluOp] = {op.name: op for op in _OPS}
"""Every ALU op's description, by name; its names are the simulator's (a test checks both ways)."""
