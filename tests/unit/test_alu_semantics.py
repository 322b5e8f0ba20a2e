"""Python's description of each ALU op (`primitives.ALU`) is the simulator's: the same names and
arities as `alu_ops.h`, and on every op the numpy semantics (the values evaluator) and the folded
constants (the compiler) give the simulator's `apply` result, within a few f32 ulps (libm and
numpy round transcendental functions differently), NaN for NaN and each infinity for itself."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuseflow import _simulator
from fuseflow.analysis.index_notation import COMMUTATIVE, fold, preserves_zero
from fuseflow.primitives import ALU

SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 0.5, 1e-30, -1e-30, 88.0, 100.0, -100.0, np.inf, -np.inf, np.nan]


def _same(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got, want, rtol=4e-7 * 4, atol=0, equal_nan=True)


def _cpp(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.array([_simulator.alu_apply(op, float(x), float(y)) for x, y in zip(a, b)], dtype=np.float32)


def test_the_table_names_every_simulator_op_with_its_arity():
    assert {name: op.unary for name, op in ALU.items()} == dict(_simulator.alu_ops())


@pytest.mark.parametrize("op", sorted(ALU))
def test_numpy_semantics_and_folding_are_the_simulators(op):
    pairs = np.array(list(itertools.product(SPECIAL, repeat=2)), dtype=np.float32)
    a, b = pairs[:, 0], pairs[:, 1]
    want = _cpp(op, a, b)
    with np.errstate(all="ignore"):
        got = ALU[op].array(a) if ALU[op].unary else ALU[op].array(a, b)
    assert got.dtype == np.float32
    _same(got, want)
    with np.errstate(over="ignore"):  # an f64 beyond f32's range is +-inf in f32, as the ALU gives
        folded = np.array([fold(op, (float(x), float(y))) for x, y in zip(a, b)]).astype(np.float32)
    _same(folded, want)


@settings(max_examples=200, deadline=None)
@given(
    op=st.sampled_from(sorted(ALU)),
    a=st.floats(width=32, allow_nan=True, allow_infinity=True),
    b=st.floats(width=32, allow_nan=True, allow_infinity=True),
)
def test_random_operands_agree(op, a, b):
    x, y = np.array([a], dtype=np.float32), np.array([b], dtype=np.float32)
    with np.errstate(all="ignore"):
        got = ALU[op].array(x) if ALU[op].unary else ALU[op].array(x, y)
    _same(np.asarray(got, dtype=np.float32), _cpp(op, x, y))


def test_facts_are_read_off_the_semantics():
    for name, op in ALU.items():
        if op.unary:
            assert preserves_zero(name) == (_simulator.alu_apply(name, 0.0, 0.0) == 0.0), name
        if op.commutative:
            x, y = np.float32([2.5, -1.0, 0.0]), np.float32([-3.0, 4.0, 7.0])
            assert list(_cpp(name, x, y)) == list(_cpp(name, y, x)), name
    assert {"add", "mul", "max", "min"} == COMMUTATIVE
    # zeros propagate as declared (the density model's upper bound on the nonzeros): a product is
    # absent where either operand is, a union where both are, `first` where the first is
    # (absent: 0, or mask's -inf where the mask is 0)
    for name, op in ALU.items():
        if op.unary:
            continue
        z = {(x, y): _simulator.alu_apply(name, x, y) in (0.0, -np.inf) for x in (0.0, 2.0) for y in (0.0, 3.0)}
        if op.zeros == "product":
            assert z[(0.0, 3.0)] and z[(2.0, 0.0)] and z[(0.0, 0.0)], (name, z)
        elif op.zeros == "union":
            assert z[(0.0, 0.0)], (name, z)
        elif op.zeros == "first":
            assert z[(0.0, 3.0)], (name, z)
