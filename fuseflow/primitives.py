"""The one table of sam primitives and architecture settings, as the C++ simulator defines it.

Kinds (sam op mnemonics), ALU ops and `[arch]` keys are declared once, in the simulator
(`node.cpp: kPrimitives`, `alu_ops.h: kAluOps`, `timing.h: kArchKeys`), and read here through
the bindings. The dialect's ALU verifier, the architecture's keys (`sim/arch.py`), the simulator
front end and the cycle model take them from this module; `tests/unit/test_primitive_table.py`
checks that they agree.
"""

from __future__ import annotations

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
