"""Formats chosen when the lowering re-lays a tensor out for a loop order (`_relaid`)."""

import pytest

from fuseflow.conversion.index_to_sam import TensorInfo, _relaid
from fuseflow.formats import Format


@pytest.mark.parametrize(
    "levels, order, wanted, expected",
    [
        (("dense", "compressed"), (0, 1), (1, 0), ("dense", "compressed")),  # CSR read by columns: CSC
        (("compressed", "compressed"), (0, 1), (1, 0), ("compressed", "compressed")),  # DCSR -> DCSC
        # a per-edge message t(i,k,j): (i,k) jointly sparse, the feature axis j dense below them
        (("dense", "compressed", "dense"), (0, 1, 2), (2, 0, 1), ("dense", "dense", "compressed")),
        (("dense", "compressed", "dense"), (0, 1, 2), (1, 0, 2), ("dense", "compressed", "dense")),
        (("dense", "dense"), (0, 1), (1, 0), ("dense", "dense")),
    ],
)
def test_relaid_levels(levels, order, wanted, expected):
    t = TensorInfo("t", (4, 5, 6)[: len(levels)], Format(levels, order), "input")
    assert _relaid(t, wanted) == Format(expected, wanted)


def test_size_one_levels_are_dense():
    t = TensorInfo("t", (1, 5), Format(("dense", "compressed"), (0, 1)), "input")
    assert _relaid(t, (1, 0)).levels == ("dense", "dense")
