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


@dataclass(frozen=True)
class Primitive:
    """One primitive kind: the simulator's row of the table (`node.cpp: kPrimitives`) and the
    facts about it that Python code dispatches on (the simulator front end, `sam-parallelize`).
    Ports, attributes and types of the op itself are the dialect's (`dialects/sam.py`); a test
    checks that both agree (`tests/unit/test_primitive_table.py`)."""

    kind: str
    resource: str
    """The fabric unit that holds one: ``memory`` or ``compute``."""
    inputs: int
    """Input ports (-1: variadic, the op's operand segments decide)."""
    outputs: int
    params: dict[str, str]
    """Parameters the simulator reads from the op's attributes: name -> ``int``/``float``/``string``."""
    data: dict[str, str]
    """Parameters the front end binds at run time: tensor data (a compressed level's ``seg``/``crd``,
    ``vals``) and a dense scan's row window (``lo``/``hi``: a sampled unit, fuseflow/sampling)."""
    tile: dict[str, str]
    """Parameters of a blocked value stream (tile layouts)."""
    emits: str
    """What its first output carries: ``values``, ``streams`` (refs, coordinates, signals, or
    nothing), or ``as_input`` (a lane op: whatever its first input carries)."""
    lanes: str
    """How deep below a parallel level its outputs lie, from its inputs' depths (`sam-parallelize`):
    ``deeper`` (a scan: one level below its ref), ``shallower`` (a reduction), ``signal`` (a
    repeat: its signal's), ``spacc`` (an accumulator's own rule), ``each`` (a dropper: each
    output its input's), ``aligned`` (its first input's)."""
    value_inputs: str = "none"
    """Which inputs are value streams (tile layouts): ``all``, ``first``, ``last`` or ``none``."""


_PYTHON_FACTS: dict[str, tuple[str, str, str]] = {  # kind: (emits, lanes, value_inputs)
    "root": ("streams", "aligned", "none"),
    "scan": ("streams", "deeper", "none"),
    "locate": ("streams", "aligned", "none"),
    "intersect": ("streams", "aligned", "none"),
    "union": ("streams", "aligned", "none"),
    "repsiggen": ("streams", "aligned", "none"),
    "repeat": ("streams", "signal", "none"),
    "load": ("values", "aligned", "none"),
    "alu": ("values", "aligned", "all"),
    "reduce": ("values", "shallower", "first"),
    "spacc": ("values", "spacc", "last"),
    "crd_drop": ("streams", "each", "none"),
    "val_drop": ("streams", "each", "none"),
    "write_crd": ("streams", "aligned", "none"),
    "write_val": ("streams", "aligned", "first"),
    "fork": ("as_input", "aligned", "none"),
    "join": ("as_input", "aligned", "none"),
}


def _table() -> dict[str, Primitive]:
    out = {}
    for row in _simulator.primitive_table():
        kind = row["kind"]
        if kind not in _PYTHON_FACTS:
            raise RuntimeError(f"the simulator's primitive {kind!r} has no entry in fuseflow.primitives._PYTHON_FACTS")
        emits, lanes, value_inputs = _PYTHON_FACTS[kind]
        out[kind] = Primitive(
            kind,
            row["resource"],
            row["inputs"],
            row["outputs"],
            dict(row["params"]),
            dict(row["data"]),
            dict(row["tile"]),
            emits,
            lanes,
            value_inputs,
        )
    return out


PRIMITIVES: dict[str, Primitive] = _table()
"""Every primitive the simulator builds, by kind (sam op mnemonic), in the simulator's order."""
KINDS: tuple[str, ...] = tuple(PRIMITIVES)
"""Every primitive kind the simulator builds."""
ALU_OPS: dict[str, bool] = dict(_simulator.alu_ops())
"""ALU op name -> whether it is unary."""
ALU_UNARY: tuple[str, ...] = tuple(n for n, unary in ALU_OPS.items() if unary)
ALU_BINARY: tuple[str, ...] = tuple(n for n, unary in ALU_OPS.items() if not unary)
ARCH_KEYS: dict[str, dict[str, str]] = {k: dict(v) for k, v in _simulator.arch_keys().items()}
"""``{"arch": {key: type}, "kinds": {...}, "memory": {...}}``; types: int (positive), uint, bool, table."""
RESOURCE: dict[str, str] = {k: p.resource for k, p in PRIMITIVES.items()}
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
