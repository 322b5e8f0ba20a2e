"""A Gantt chart of a timeline (matplotlib, the ``plot`` extra): one bar per region run, packed
into tracks so that regions running at the same time sit on different rows, and the busy units
per resource class underneath."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fuseflow.errors import FuseflowError
from fuseflow.fabric.scheduler import Span, Utilization, tracks
from fuseflow.sim.arch import RESOURCES, Fabric


def draw(timeline: Sequence[Span], path: str | Path, title: str, fabric: Fabric | None) -> None:
    """A Gantt chart of `timeline` (a bar per region, the units in use below it), saved to `path`."""
    try:
        import matplotlib  # optional extra (plot)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # optional extra (plot)
    except ImportError:
        raise FuseflowError("--timeline needs matplotlib: pip install 'fuseflow[plot]'") from None
    rows = tracks(timeline)
    n_rows = max(rows, default=0) + 1
    fig, (ax, au) = plt.subplots(
        2, 1, figsize=(11, 2.2 + 0.28 * n_rows), sharex=True, gridspec_kw={"height_ratios": [max(n_rows, 2), 2]}
    )
    colours = plt.get_cmap("tab20")
    for k, (s, row) in enumerate(zip(timeline, rows)):
        if s.reconfig:
            ax.barh(row, s.reconfig, left=s.start, color="0.8", edgecolor="0.5", linewidth=0.3)
        ax.barh(
            row,
            s.end - s.start - s.reconfig,
            left=s.start + s.reconfig,
            color=colours(k % 20),
            edgecolor="0.3",
            linewidth=0.3,
        )
        end = max(x.end for x in timeline)
        if (s.end - s.start) > 0.04 * end:  # a name only where it fits
            ax.text(s.start + s.reconfig, row, " " + s.label, va="center", ha="left", fontsize=6, clip_on=True)
    ax.set_yticks(range(n_rows), [f"track {r}" for r in range(n_rows)], fontsize=7)
    ax.invert_yaxis()
    ax.set_title(title, fontsize=9)
    util = Utilization.of(timeline, fabric)
    xs = [t for t, _ in util.steps]
    for r in RESOURCES:
        au.step(xs, [b[r] for _, b in util.steps], where="post", label=f"{r} units busy")
        if fabric is not None:
            au.axhline(fabric.capacity(r), linestyle=":", linewidth=0.8, color="0.4")
    au.set_xlabel("cycle")
    au.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
