"""The lane search on hand-made menus, against makespans worked out by hand (fuseflow/planning/lanes.py)."""

from __future__ import annotations

from fuseflow.fabric.dag import Task
from fuseflow.planning.lanes import LaneOption, Menu, assign, assignments, refine, uniform
from fuseflow.sim.arch import Fabric


def _opt(level, factor, units, cycles):
    return LaneOption(level, factor, {"compute": units, "memory": units}, float(cycles))


def _menu(options: dict, chain: bool = False) -> Menu:
    """Regions A and B on a 10 + 10 unit fabric; independent, or B reading A's output (`chain`)."""
    tasks = [
        Task("A", frozenset({"x"}), frozenset({"a"}), {}),
        Task("B", frozenset({"a" if chain else "y"}), frozenset({"b"}), {}),
    ]
    return Menu(["A", "B"], options, [], tasks, Fabric(compute=10, memory=10), {})


OPTIONS = {
    "A": [_opt(None, 1, 2, 100), _opt("i", 2, 4, 50), _opt("i", 4, 8, 26)],
    "B": [_opt(None, 1, 2, 100), _opt("i", 2, 4, 50)],
}


def test_one_at_a_time_each_region_takes_its_fastest_option():
    menu = _menu(OPTIONS)
    choice = assign(menu, "sequential")
    assert (choice["A"].factor, choice["B"].factor) == (4, 2)
    assert menu.makespan(choice, "sequential") == 26 + 50


def test_side_by_side_the_regions_share_the_array():
    """A at 4 lanes (8 units) and B at 2 (4) cannot run together on 10 units: 26 + 50 = 76.
    Two lanes each (8 units) run together: 50. Growing one region alone never shortens the
    makespan (the other still takes 100), so greedy growth stops at one lane; the uniform
    starting points find the pair."""
    menu = _menu(OPTIONS)
    greedy = assign(menu, "concurrent")
    assert menu.makespan(greedy, "concurrent") == 100
    assert menu.makespan(uniform(menu, 4), "concurrent") == 76
    weighed = assignments(menu, "concurrent", 16)
    best = min(weighed.values(), key=lambda c: menu.makespan(c, "concurrent"))
    assert menu.makespan(best, "concurrent") == 50
    assert (best["A"].factor, best["B"].factor) == (2, 2)


def test_refinement_gives_back_lanes_that_buy_under_one_percent():
    options = {"A": [_opt(None, 1, 2, 100), _opt("i", 2, 4, 60), _opt("i", 4, 8, 59.8)], "B": [_opt(None, 1, 2, 10)]}
    menu = _menu(options, chain=True)
    refined = refine(menu, uniform(menu, 4), "sequential")
    assert refined["A"].factor == 2  # 59.8 + 10 is within 1% of 60 + 10, on half the units


def test_a_dependence_orders_the_regions_on_any_fabric():
    menu = _menu(OPTIONS, chain=True)
    spans = {s.region: (s.start, s.end) for s in menu.timeline(uniform(menu, 2), "concurrent")}
    assert spans["B"][0] >= spans["A"][1] == 50
