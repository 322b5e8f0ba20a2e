"""Sparsity blocking (block{size=b}): blocked regions iterate b x b blocks with dense tile values.

Outputs are compared with PyTorch at the default tolerance of `SimResult.check` (rtol = atol =
1e-5 x the longest dimension: tiles reassociate sums differently) and with the unblocked run.
"""

import numpy as np
import pytest
import sae
from hypothesis import given, settings
from hypothesis import strategies as st
from test_parallelize import attention

import fuseflow
from fuseflow.formats import Format, pack_blocked, parse_format, unpack_blocked


def run(build, passes=None, **kw):
    model, args, formats = build(**kw)
    prog = fuseflow.compile(model, args, formats=formats, schedule="full", passes=passes)
    res = prog.simulate()
    res.check()
    return res


@pytest.mark.parametrize("block", [16, 32])
def test_blocked_bigbird_attention_matches_unblocked(block):
    plain = run(attention, seq=64, d=32, block=block)
    blocked = run(attention, passes=f"block{{size={block}}}", seq=64, d=32, block=block)
    np.testing.assert_allclose(blocked.outputs[0].numpy(), plain.outputs[0].numpy(), rtol=1e-4, atol=1e-5)
    assert blocked.cycles < plain.cycles


def alu_ops(res):
    return sum(r.totals()["alu_ops"] for r in res.regions)


def test_block_structured_weights_gain_more_than_unstructured():
    kw = dict(n_in=256, n_hidden=128)
    unstructured = run(sae.build, "block{size=16}", **kw)
    structured = run(sae.build, "block{size=16}", block_pruned=16, **kw)
    scalar = run(sae.build, None, **kw)
    # Unstructured 90% sparsity leaves a nonzero in nearly every 16x16 block: blocking computes
    # the zeros too (several times the scalar ALU work); block-pruned weights skip whole blocks.
    assert alu_ops(unstructured) > 3 * alu_ops(scalar)
    assert alu_ops(structured) < alu_ops(unstructured) / 5
    assert structured.cycles < unstructured.cycles < scalar.cycles


def test_block_size_must_divide_the_shape():
    with pytest.raises(fuseflow.FuseflowError, match="block size 24 does not divide"):
        run(attention, "block{size=24}", seq=64, d=32, block=16)
    with pytest.raises(fuseflow.FuseflowError, match="size must be a positive integer"):
        run(attention, "block{size=0}", seq=32, d=8, block=16)


def test_bcsr_format_parses_and_imports_as_mlir_bsr():
    fmt = parse_format("bcsr<16>", 2)
    assert fmt == Format(("dense", "compressed"), (0, 1), 16) and str(fmt) == "bcsr<16>"
    model, args, _ = attention(seq=32, d=8, block=16)
    prog = fuseflow.compile(model, args, formats={"mask": "bcsr16"}, schedule="full")
    assert "d0 floordiv 16 : dense, d1 floordiv 16 : compressed, d0 mod 16 : dense" in prog.mlir("linalg")
    prog.simulate().check()  # unblocked: the bcsr mask is read as CSR


@settings(max_examples=25, deadline=None)
@given(
    grid=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    b=st.sampled_from([1, 2, 4]),
    fmt=st.sampled_from(["csr", "csc", "dcsr", "dense"]),
    density=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
    seed=st.integers(0, 1000),
)
def test_blocked_pack_unpack_round_trip(grid, b, fmt, density, seed):
    rng = np.random.default_rng(seed)
    shape = (grid[0] * b, grid[1] * b)
    a = (rng.random(shape) * (rng.random(shape) < density)).astype(np.float32)
    f = parse_format(fmt, 2)
    p = pack_blocked(a, f, b)
    # writers store every level as seg/crd: dense levels written out in full
    segs, crds = [], []
    level_grid = [grid[m] for m in f.mode_order]
    for lvl, kind in enumerate(f.levels):
        if kind == "dense":
            n = 1 if lvl == 0 else len(crds[-1])
            segs.append(np.arange(n + 1) * level_grid[lvl])
            crds.append(np.tile(np.arange(level_grid[lvl]), n))
        else:
            segs.append(p.segs[lvl])
            crds.append(p.crds[lvl])
    np.testing.assert_array_equal(unpack_blocked(segs, crds, p.vals, shape, f.mode_order, b), a)
    stored_blocks = len(p.vals) // (b * b)
    nonzero_blocks = int((np.abs(a.reshape(grid[0], b, grid[1], b)).sum((1, 3)) > 0).sum())
    if fmt == "dcsr":
        assert stored_blocks == nonzero_blocks
