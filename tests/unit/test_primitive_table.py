"""One table of primitives: the simulator declares the kinds and ALU ops; the dialect, the
architecture keys and the cycle model agree with it."""

import pytest

from fuseflow import _simulator
from fuseflow.cost.cycle_model import RULES
from fuseflow.dialects import sam
from fuseflow.errors import FuseflowError
from fuseflow.primitives import ALU_BINARY, ALU_UNARY, KINDS, PRIMITIVES
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


def _dialect_class(kind: str):
    stack = list(sam.Sam.Operation.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if (getattr(cls, "OPERATION_NAME", None) or getattr(cls, "name", None)) == f"sam.{kind}":
            return cls
    raise AssertionError(f"no dialect op sam.{kind}")


def _fields(cls) -> dict[str, str]:
    """The op's declared operands, results and attributes (annotations along its bases)."""
    out: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        out.update({k: str(v) for k, v in getattr(base, "__annotations__", {}).items()})
    return out


def _ports(fields: dict[str, str], what: str) -> int:
    """Port count the dialect declares (-1 if any group is variadic)."""
    mine = [v for v in fields.values() if f"ir.{what}[" in v]
    return -1 if any(v.startswith("collections.abc.Sequence[") for v in mine) else len(mine)


ATTR_TYPES = {"int": "IntegerAttr", "float": "FloatAttr", "string": "StringAttr"}


@pytest.mark.parametrize("kind", KINDS)
def test_the_simulators_ports_and_params_are_the_dialects(kind):
    """One description per primitive: the simulator's table (ports, the parameters it reads from
    the op) and the dialect's op definition agree field by field."""
    prim = PRIMITIVES[kind]
    fields = _fields(_dialect_class(kind))
    assert _ports(fields, "Value") == prim.inputs, (kind, fields)
    assert _ports(fields, "OpResult") == prim.outputs, (kind, fields)
    for name, type_ in prim.params.items():
        assert name in fields, f"sam.{kind} has no attribute {name!r} that the simulator reads"
        assert fields[name].endswith(f".{ATTR_TYPES[type_]}'>"), (kind, name, fields[name])
    assert prim.resource in ("memory", "compute")
    assert not set(prim.params) & set(prim.data), kind


def test_the_simulator_refuses_parameters_its_table_does_not_declare():
    g = _simulator.Graph(Arch.resolve("comal").settings)
    root = g.add_node("root", "r", [], {})
    with pytest.raises(ValueError, match="scan 's': unknown parameter 'dims'"):
        g.add_node("scan", "s", [(root, 0)], {"format": "dense", "dims": 4})
    g.add_node("scan", "s", [(root, 0)], {"format": "dense", "dim": 4})  # the declared spelling


def test_a_dense_scans_row_window_outside_its_level_is_refused():
    """The run-time window of a sampled unit (fuseflow/sampling/window.py) must lie in 0..dim."""
    g = _simulator.Graph(Arch.resolve("comal").settings)
    root = g.add_node("root", "r", [], {})
    with pytest.raises(ValueError, match="scan 's': window 3..2 outside 0..4"):
        g.add_node("scan", "s", [(root, 0)], {"format": "dense", "dim": 4, "lo": 3, "hi": 2})
    with pytest.raises(ValueError, match="window 0..5 outside 0..4"):
        g.add_node("scan", "t", [(root, 0)], {"format": "dense", "dim": 4, "lo": 0, "hi": 5})
    g.add_node("scan", "u", [(root, 0)], {"format": "dense", "dim": 4, "lo": 1, "hi": 3})
