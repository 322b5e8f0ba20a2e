"""How the cycle model follows a reference stream through memory lines (`cost/memory_walk.py`).

The expected figures are counted by hand from the simulator's rule (node.cpp `request_lines`:
one line buffer per array and node, 16 four-byte elements per 64-byte line).
"""

from __future__ import annotations

import pytest

from fuseflow.cost.memory_walk import Walk
from fuseflow.cost.timing import Timing, model_approximates

SEQUENTIAL = Walk(same=0.0, jump=0.0, free=0.0, step=1.0)


def test_an_unknown_stream_changes_line_on_every_token():
    assert Walk().line_changes(16) == 1.0


def test_a_sequential_walk_changes_line_once_per_line():
    assert SEQUENTIAL.line_changes(16) == pytest.approx(1 / 16)


def test_a_repeated_reference_reads_its_line_once():
    """A reference repeated 16 times (a repeat node) needs a line on its first copy only."""
    rep = SEQUENTIAL.repeated(16)
    assert rep.same == pytest.approx(15 / 16)
    assert rep.line_changes(16) == pytest.approx(1 / 16 / 16)


def test_walking_an_aligned_one_line_row_again_is_free():
    """SpMM in order k,i,j walks row k of a 16-column dense X once per i: the row is one line,
    so every walk after the first stays in it."""
    refs = SEQUENTIAL.repeated(8)  # the row's reference, once per i
    walk = refs.walked(refs=8.0, fiber=16.0, span=16.0, aligned=True)
    assert walk.free == pytest.approx(7 / 8)
    assert walk.line_changes(16) < 1 / 16


def test_walking_consecutive_rows_changes_line_once_per_row():
    """Aligned one-line rows one after the other: a line per row, read at the row's start."""
    walk = SEQUENTIAL.walked(refs=10.0, fiber=16.0, span=16.0, aligned=True)
    assert walk.line_changes(16) == pytest.approx(1 / 16) and walk.inline == pytest.approx(15 / 16)


def test_walking_consecutive_unaligned_rows_continues_where_the_last_ended():
    walk = SEQUENTIAL.walked(refs=10.0, fiber=24.0, span=24.0)
    assert walk.jump == 0.0 and walk.line_changes(16) == pytest.approx(1 / 16)


def test_rows_reached_through_scattered_references_start_with_a_new_line():
    """A row per scattered reference (a gather): the row's start jumps, its inside walks."""
    walk = Walk().walked(refs=10.0, fiber=4.0, span=4.0)
    assert walk.jump == pytest.approx(1 / 4)


def test_an_aligned_one_line_row_reached_by_a_jump_is_one_line():
    """GCN's layer in order i,j,k,l reads row k of a 16-column X for each neighbour k: the row
    lies in one line, so a jump to it costs one line and the 15 reads after it none (the
    simulator: 1,520 lines for 25,841 tokens; counting the steps inside at 1/16 each gave
    1.94 a row). The steps inside stay apart from re-walks: `free` stays 0."""
    walk = Walk().walked(refs=10.0, fiber=16.0, span=16.0, aligned=True)
    assert walk.jump == pytest.approx(1 / 16) and walk.inline == pytest.approx(15 / 16) and walk.free == 0.0
    assert walk.line_changes(16) * 16 == pytest.approx(1.0)


def test_half_line_rows_walked_in_order_change_line_every_other_row():
    """Aligned rows of 8 walked one after the other: two rows a line."""
    walk = SEQUENTIAL.walked(refs=10.0, fiber=8.0, span=8.0, aligned=True)
    assert walk.line_changes(16) * 8 == pytest.approx(0.5)


def test_a_thinned_or_repeated_walk_keeps_its_steps_inside_a_line():
    walk = Walk().walked(refs=10.0, fiber=16.0, span=16.0, aligned=True)
    assert walk.repeated(2.0).line_changes(16) == pytest.approx(walk.line_changes(16) / 2)
    assert walk.thinned(2.0).line_changes(16) * 8 == pytest.approx(1.0)  # a line per fiber of 8 survivors


def test_a_step_of_a_line_or_more_is_a_jump():
    """A transposed dense walk (stride 16) changes line on every token."""
    walk = SEQUENTIAL.walked(refs=4.0, fiber=2.0, span=32.0)
    assert walk.line_changes(16) == pytest.approx(1.0)


def test_a_thinned_walk_keeps_its_jumps_and_stretches_its_steps():
    thin = Walk(same=0.0, jump=0.1, free=0.0, step=1.0).thinned(4.0)
    assert thin.jump == pytest.approx(0.4) and thin.step == pytest.approx(4.0)


@pytest.mark.parametrize(
    ("timing", "approximates"),
    [
        (Timing(), False),  # comal: unbounded FIFOs, no memory model
        (Timing(fifo_depth=16, memory={"latency": 80}), True),  # rda
        (Timing(fifo_depth=128, memory={"latency": 80}), False),  # FIFOs hide the latency
        (Timing(fifo_depth=16, memory={"latency": 80, "enabled": False}), False),
    ],
)
def test_which_machines_the_model_only_approximates(timing, approximates):
    assert model_approximates(timing) is approximates
