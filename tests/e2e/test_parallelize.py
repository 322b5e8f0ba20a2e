"""sam-parallelize: outputs identical for every lane count and equal to PyTorch; cycles of
the masked attention scale near-linearly with the lanes.

Tolerance against PyTorch: the default of `SimResult.check` (rtol = atol = 1e-5 x the longest
dimension). Between lane counts the outputs must be bit-identical (same arithmetic, same order).
"""

import gcn_layer
import numpy as np
import pytest
import spgemm_chain

import fuseflow
from fuseflow.models import masked_attention


def attention(seq=64, d=32, block=16):
    return masked_attention(seq, d, block)


def lanes(build, schedule, level, factors):
    model, args, formats = build()
    out = {}
    for p in factors:
        prog = fuseflow.compile(
            model, args, formats=formats, schedule=schedule, passes=f"sam-parallelize{{level={level} factor={p}}}"
        )
        res = prog.simulate()
        res.check()
        out[p] = res
    return out


@pytest.mark.parametrize(
    "build,schedule",
    [(spgemm_chain.build, "full"), (gcn_layer.build, "full"), (attention, "full")],
    ids=["spgemm-chain", "gcn-layer", "attention"],
)
def test_outputs_identical_for_every_lane_count(build, schedule):
    runs = lanes(build, schedule, "i", [1, 2, 4, 8])
    ref = runs[1].outputs[0].numpy()
    for p, res in runs.items():
        np.testing.assert_array_equal(res.outputs[0].numpy(), ref, err_msg=f"factor {p}")
    assert runs[8].cycles < runs[1].cycles


def test_two_levels_of_lanes_scale_attention_past_12x():
    """Lanes at the query rows i, then inside every row lane at the head dimension j and the key
    loops (m, p: softmax statistics; k: the output's sum): 4 x 4 lanes."""
    runs = lanes(attention, "full", "i", [1, 4])
    model, args, formats = attention()
    prog = fuseflow.compile(
        model,
        args,
        formats=formats,
        schedule="full",
        passes="sam-parallelize{level=i factor=4},sam-parallelize{level=j,m,p,k factor=4}",
    )
    two = prog.simulate()
    two.check()
    np.testing.assert_array_equal(two.outputs[0].numpy(), runs[1].outputs[0].numpy())
    assert runs[1].cycles / two.cycles >= 12, (runs[1].cycles, two.cycles)


def test_masked_attention_scales_near_linearly():
    runs = lanes(attention, "full", "i", [1, 2, 4])
    speedup = {p: runs[1].cycles / r.cycles for p, r in runs.items()}
    assert speedup[2] >= 1.8, speedup
    assert speedup[4] >= 3.4, speedup


def test_lanes_are_recorded_and_bad_levels_refused():
    model, args, formats = attention(seq=32, d=8)
    prog = fuseflow.compile(model, args, formats=formats, schedule="full", passes="sam-parallelize{level=i factor=3}")
    res = prog.simulate()
    res.check()  # 3 does not divide 32: round-robin lanes differ by one row, outputs unchanged
    assert res.to_json()["passes"] == "sam-parallelize{level=i factor=3}, fuseflow-order{order=auto cap=64}"
    chain, chain_args, chain_formats = spgemm_chain.build()  # j is sparse under k there
    with pytest.raises(fuseflow.FuseflowError, match="cannot parallelize at 'j'.*'j' is sparse"):
        fuseflow.compile(
            chain, chain_args, formats=chain_formats, schedule="full", passes="sam-parallelize{level=j factor=2}"
        )
    with pytest.raises(fuseflow.FuseflowError, match="no such index variable"):
        fuseflow.compile(model, args, formats=formats, schedule="full", passes="sam-parallelize{level=zz factor=2}")
    with pytest.raises(fuseflow.FuseflowError, match="factor must be a positive integer"):
        fuseflow.compile(model, args, formats=formats, schedule="full", passes="sam-parallelize{level=i factor=0}")
