"""The one table of sam primitives, as the C++ simulator defines it.

Kinds (sam op mnemonics) and ALU ops are declared once, in the simulator (`node.cpp:
kPrimitives`, `alu_ops.h: kAluOps`), and read here through the bindings. The dialect's ALU
verifier, the architecture's `[arch.kinds.*]` keys, the simulator front end and the cycle model
take them from this module; `tests/unit/test_primitive_table.py` checks that the dialect defines
an op for every kind and that the cycle model has a rule for every kind.
"""

from __future__ import annotations

from fuseflow import _simulator

KINDS: tuple[str, ...] = tuple(_simulator.primitive_kinds())
"""Every primitive kind the simulator builds."""
ALU_OPS: dict[str, bool] = dict(_simulator.alu_ops())
"""ALU op name -> whether it is unary."""
ALU_UNARY: tuple[str, ...] = tuple(n for n, unary in ALU_OPS.items() if unary)
ALU_BINARY: tuple[str, ...] = tuple(n for n, unary in ALU_OPS.items() if not unary)
