"""Evaluating one design point in a worker: build the model, then `point.measure` it.

Workers (local processes or Ray tasks) get only picklable data: the model file's path, its
build() options and a `Point`; each keeps the models it built (one build per worker and options).
"""

from __future__ import annotations

import os
import time
from typing import Any

from fuseflow.experiments.point import measure
from fuseflow.experiments.space import Point
from fuseflow.model_files import build_from_file

_MODELS: dict[tuple, tuple] = {}

_DSE_KEYS = {  # a measured row's key -> the dse row's (its JSON and Parquet columns)
    "regions": "regions",
    "estimated_cycles": "est_cycles",
    "estimated_mem_bytes": "est_mem_bytes",
    "estimated_alu_ops": "est_alu_ops",
    "cycles": "cycles",
    "alu_ops": "alu_ops",
    "max_abs_error": "max_abs_error",
    "chosen_strategy": "chosen_strategy",
    "split": "split",
    "chosen_schedule": "chosen_schedule",
    "traceback": "traceback",
    "interval": "interval",
    "sampled": "sampled",
}


def _model(path: str, options: dict[str, Any]) -> tuple:
    key = (path, tuple(sorted(options.items())))
    if key not in _MODELS:
        _MODELS[key] = build_from_file(path, options)[1]
    return _MODELS[key]


def evaluate(path: str, options: dict[str, Any], point: Point, simulate: bool = True) -> dict[str, Any]:
    """One row: the point, its estimate and (when `simulate`) its simulated cycles and counters.

    A point that cannot be compiled or simulated is a row with ``status = "failed: ..."``, never
    a lost sweep."""
    os.environ.setdefault("TMPDIR", os.path.join(os.getcwd(), "build", "tmp"))
    os.makedirs(os.environ["TMPDIR"], exist_ok=True)
    t0 = time.perf_counter()
    got = measure(
        lambda: _model(path, options),
        schedule=point.schedule,
        order=point.order,
        passes=point.passes(),
        arch=point.arch_spec(),
        strategy=point.strategy,
        simulate=simulate,
        sample=point.sample or None,
    )
    row: dict[str, Any] = {**point.as_dict(), "status": got["status"]}
    row.update({dse: got[key] for key, dse in _DSE_KEYS.items() if key in got})
    if "mem_read_bytes" in got:
        row["mem_bytes"] = got["mem_read_bytes"] + got["mem_write_bytes"]
    row["wall_s"] = round(time.perf_counter() - t0, 3)
    return row
