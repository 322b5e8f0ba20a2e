"""``fuseflow dse``: sweep a design space on a local pool or Ray, with a content-addressed cache of
finished points (a re-run resumes), rows as JSON/Parquet and a Pareto plot.

A point's cache key hashes the model file, its build() options, the example inputs and
parameters (their bytes: any change to the data or its structure is a new key), the point
(schedule, order, lanes, block, arch), whether it was simulated, and fuseflow's version.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fuseflow.errors import FuseflowError
from fuseflow.executor import Executor, make_executor
from fuseflow.experiments.evaluate import _model, evaluate
from fuseflow.experiments.space import Point, Space, load_space
from fuseflow.version import __version__

__all__ = ["Point", "Space", "Sweep", "load_space", "make_executor", "sweep"]


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def inputs_digest(path: str, options: dict[str, Any]) -> str:
    """Hash of the model file and of every example input and parameter it builds."""

    h = hashlib.sha256(Path(path).read_bytes())
    h.update(json.dumps(options, sort_keys=True).encode())
    model, args, formats = _model(path, options)
    tensors = [a for a in args if isinstance(a, torch.Tensor)] + [t for _, t in sorted(model.state_dict().items())]
    for t in tensors:
        d = t.to_dense() if t.layout != torch.strided else t
        h.update(np.ascontiguousarray(d.detach().cpu().numpy()).tobytes())
    h.update(json.dumps(formats, sort_keys=True, default=str).encode())
    return h.hexdigest()


class Cache:
    """Finished rows by key, one JSON file each (safe to share between concurrent sweeps)."""

    def __init__(self, root: str | Path | None):
        self.root = Path(root) if root else None
        if self.root:
            self.root.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> dict | None:
        if not self.root:
            return None
        p = self.root / f"{key}.json"
        try:
            return json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            return None

    def put(self, key: str, row: dict) -> None:
        if self.root and not row["status"].startswith("failed"):
            tmp = self.root / f"{key}.json.tmp"
            tmp.write_text(json.dumps(row))
            tmp.replace(self.root / f"{key}.json")


@dataclass
class Sweep:
    """What `sweep` returns: one row per design point, with the model and options it ran."""

    model: str
    options: dict[str, Any]
    rows: list[dict] = field(default_factory=list)
    executor: str = "local"
    cached: int = 0

    def to_json(self) -> dict:
        """The sweep as JSON: the model, its options, the executor and one row per point."""
        return {"model": self.model, "options": self.options, "executor": self.executor, "points": self.rows}


def _dominated(rows: list[dict]) -> set[int]:
    """Rows whose estimated cycles, bytes and ALU ops are all matched or beaten by another's."""
    key = ("est_cycles", "est_mem_bytes", "est_alu_ops")
    ok = [i for i, r in enumerate(rows) if all(k in r for k in key)]
    out = set()
    for i in ok:
        for j in ok:
            if i != j:
                a, b = rows[i], rows[j]
                if all(b[k] <= a[k] for k in key) and any(b[k] < a[k] for k in key):
                    out.add(i)
                    break
    return out


def sweep(
    path: str,
    options: dict[str, Any],
    space: Space,
    executor: Executor,
    cache_dir: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Sweep:
    """Run every point of `space` (or only the ones the estimate does not dominate, with
    ``space.prune``), serving finished points from the cache."""

    cache = Cache(cache_dir)
    base = {"inputs": inputs_digest(path, options), "fuseflow": __version__}
    points = space.points()
    out = Sweep(path, options, executor=executor.name)
    done = 0
    total = len(points) * (2 if space.prune else 1)

    def run(todo: list[tuple[int, Point]], simulate: bool) -> dict[int, dict]:
        nonlocal done
        rows: dict[int, dict] = {}
        tasks, where = [], []
        for i, p in todo:
            key = _digest({**base, "point": p.as_dict(), "simulate": simulate})
            hit = cache.get(key)
            if hit is not None:
                rows[i] = {**hit, "cached": True}
                out.cached += 1
                done += 1
                if progress:
                    progress(done, total)
            else:
                tasks.append((path, options, p, simulate))
                where.append((i, key))
        for k, row in executor.run(evaluate, tasks):
            i, key = where[k]
            cache.put(key, row)
            rows[i] = {**row, "cached": False}
            done += 1
            if progress:
                progress(done, total)
        return rows

    indexed = list(enumerate(points))
    if space.prune:
        est = run(indexed, simulate=False)
        ordered = [est[i] for i in range(len(points))]
        pruned = _dominated(ordered)
        sim = run([(i, p) for i, p in indexed if i not in pruned], simulate=True)
        done += len(pruned)
        rows = [sim.get(i) or {**est[i], "status": "pruned: dominated by estimate"} for i in range(len(points))]
    else:
        got = run(indexed, simulate=True)
        rows = [got[i] for i in range(len(points))]
    for i, r in enumerate(rows):
        r["point"] = i
    out.rows = rows
    return out


def flat_rows(rows: list[dict]) -> list[dict]:
    """Rows with arch parameters as ``arch.<key>`` columns (for Parquet and tables); a sampled
    point's interval as ``cycles_low``/``cycles_high`` and its sample as ``sampled_units``/
    ``sampled_total``/``sampled_target``."""
    out = []
    for r in rows:
        f = {k: v for k, v in r.items() if k not in ("arch_params", "traceback", "interval", "sampled")}
        for k, v in (r.get("arch_params") or {}).items():
            f[f"arch.{k}"] = v
        if r.get("interval"):
            f["cycles_low"], f["cycles_high"] = r["interval"]
            s = r.get("sampled") or {}
            f.update(sampled_units=s.get("units"), sampled_total=s.get("total"), sampled_target=s.get("target"))
        out.append(f)
    return out


def write_parquet(rows: list[dict], path: str | Path) -> None:
    try:
        import pyarrow as pa  # optional extra (parquet)
        import pyarrow.parquet as pq  # optional extra (parquet)
    except ImportError:
        raise FuseflowError("Parquet output needs pyarrow: pip install 'fuseflow[parquet]'") from None
    flat = flat_rows(rows)
    columns = sorted({k for r in flat for k in r})
    pq.write_table(pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in flat]), str(path))


def pareto_plot(rows: list[dict], path: str | Path, title: str = "") -> None:
    """Cycles vs memory traffic, ALU ops as colour; pruned points marked x, the front drawn."""
    try:
        import matplotlib  # optional extra (plot)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # optional extra (plot)
    except ImportError:
        raise FuseflowError("plots need matplotlib: pip install 'fuseflow[plot]'") from None
    done = [r for r in rows if r.get("cycles") is not None]
    pruned = [r for r in rows if str(r.get("status", "")).startswith("pruned")]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if done:
        sc = ax.scatter(
            [r["cycles"] for r in done],
            [r["est_mem_bytes"] for r in done],
            c=[r["alu_ops"] for r in done],
            cmap="viridis",
            s=40,
            label="simulated",
        )
        fig.colorbar(sc, ax=ax, label="ALU ops (FLOPs)")
        front, best = [], float("inf")
        for r in sorted(done, key=lambda r: (r["cycles"], r["est_mem_bytes"])):
            if r["est_mem_bytes"] < best:
                front.append(r)
                best = r["est_mem_bytes"]
        ax.step(
            [r["cycles"] for r in front],
            [r["est_mem_bytes"] for r in front],
            where="post",
            color="k",
            lw=0.8,
            label="Pareto front",
        )
        for r in front:
            ax.annotate(
                _label(r), (r["cycles"], r["est_mem_bytes"]), fontsize=7, xytext=(3, 3), textcoords="offset points"
            )
    if pruned:
        ax.scatter(
            [r["est_cycles"] for r in pruned],
            [r["est_mem_bytes"] for r in pruned],
            marker="x",
            color="grey",
            label="pruned (estimate)",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("cycles (simulated; pruned: estimated)")
    ax.set_ylabel("memory traffic, bytes (cycle model)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(str(path))
    plt.close(fig)


def _label(r: dict) -> str:
    parts = [r["schedule"]]
    if r.get("order") not in (None, "auto"):
        parts.append(r["order"])
    if r.get("par"):
        parts.append(f"par {r['par']}")
    if r.get("block"):
        parts.append(f"b{r['block']}")
    if r.get("arch") != "comal":
        parts.append(r["arch"])
    parts += [f"{k}={v}" for k, v in (r.get("arch_params") or {}).items()]
    return " ".join(parts)
