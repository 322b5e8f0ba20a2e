"""One table of primitives: the simulator declares the kinds and ALU ops; the dialect, the
architecture keys and the cycle model agree with it."""

import pytest

from fuseflow import _simulator
from fuseflow.dialects import sam
from fuseflow.errors import FuseflowError
from fuseflow.planning.cycle_model import RULES
from fuseflow.primitives import ALU_BINARY, ALU_UNARY, KINDS
from fuseflow.sim.arch import Arch

# Dialect ops that are not simulator primitives: the container, and concat (not simulated yet).
NOT_PRIMITIVES = {"graph", "concat"}


def _dialect_ops() -> set[str]:
    seen, stack = set(), list(sam.Sam.Operation.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        name = getattr(cls, "OPERATION_NAME", None) or getattr(cls, "name", None)
        if isinstance(name, str) and name.startswith("sam."):
            seen.add(name.split(".", 1)[1])
    return seen


def test_the_dialect_defines_an_op_for_every_simulator_kind_and_no_other():
    ops = _dialect_ops()
    assert set(KINDS) <= ops, set(KINDS) - ops
    assert ops - set(KINDS) == NOT_PRIMITIVES


def test_the_cycle_model_has_a_rule_for_every_kind():
    assert set(KINDS) == RULES


def test_alu_ops_come_from_the_simulator():
    assert set(ALU_UNARY) | set(ALU_BINARY) == {n for n, _ in _simulator.alu_ops()}
    assert "relu" in ALU_UNARY and "mask" in ALU_BINARY and not set(ALU_UNARY) & set(ALU_BINARY)


def test_every_kind_takes_per_kind_timing_fork_and_join_included():
    arch = Arch.resolve({"kinds": {k: {"latency": 2} for k in KINDS}})
    assert set(arch.settings["kinds"]) == set(KINDS)
    with pytest.raises(FuseflowError, match="unknown primitive kind 'forkk'"):
        Arch.resolve({"kinds": {"forkk": {"ii": 2}}})


def _value(kind: str):
    return {"int": 2, "uint": 0, "bool": True}[kind]


def test_every_arch_key_of_the_table_is_accepted_by_python_and_converted_by_cpp():
    """The [arch] keys come from the simulator's table (timing.h: kArchKeys); each is validated
    by fuseflow.sim.arch and then understood by the C++ converter (an unknown key there throws)."""
    keys = _simulator.arch_keys()
    assert {"fifo_depth", "max_fifo_mib", "kinds", "memory"} <= set(keys["arch"])
    d = {k: _value(t) for k, t in keys["arch"].items() if t != "table"}
    d["kinds"] = {"alu": {k: _value(t) for k, t in keys["kinds"].items()}}
    d["memory"] = {k: _value(t) for k, t in keys["memory"].items()}
    arch = Arch.resolve(d)
    assert arch.max_cycles == 2 and arch.settings["memory"]["startup"] == 0
    _simulator.Graph(arch.settings)  # the C++ side takes every setting Python passes it
    with pytest.raises(FuseflowError, match="unknown setting 'fifo_dept'"):
        Arch.resolve({"fifo_dept": 4})
    with pytest.raises(FuseflowError, match="memory.startup must be a non-negative integer"):
        Arch.resolve({"memory": {"startup": -1}})
