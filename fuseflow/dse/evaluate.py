"""Evaluating one design point in a worker: build the model, compile, estimate, simulate, check.

Workers (local processes or Ray tasks) get only picklable data: the model file's path, its
build() options and a `Point`; each keeps the models it built (one build per worker and options).
"""

from __future__ import annotations

import time
import traceback
from typing import Any

from fuseflow.dse.space import Point
from fuseflow.errors import FuseflowError

_MODELS: dict[tuple, tuple] = {}


def _model(path: str, options: dict[str, Any]) -> tuple:
    key = (path, tuple(sorted(options.items())))
    if key not in _MODELS:
        from fuseflow.model_files import build_from_file

        _MODELS[key] = build_from_file(path, options)[1]
    return _MODELS[key]


def evaluate(path: str, options: dict[str, Any], point: Point, simulate: bool = True) -> dict[str, Any]:
    """One row: the point, its estimate and (when `simulate`) its simulated cycles and counters.

    A point that cannot be compiled or simulated is a row with ``status = "failed: ..."``, never
    a lost sweep."""
    import os

    os.environ.setdefault("TMPDIR", os.path.join(os.getcwd(), "build", "tmp"))
    os.makedirs(os.environ["TMPDIR"], exist_ok=True)
    import fuseflow

    row: dict[str, Any] = {**point.as_dict(), "status": "ok"}
    t0 = time.perf_counter()
    try:
        model, args, formats = _model(path, options)
        prog = fuseflow.compile(model, args, formats, schedule=point.schedule, order=point.order, passes=point.passes())
        arch = point.arch_spec()
        est = prog.estimate(arch=arch, strategy=point.strategy)
        row.update(
            regions=len(prog.summary),
            est_cycles=int(est.cycles),
            est_mem_bytes=int(est.mem_bytes),
            est_alu_ops=int(est.alu_ops),
        )
        if simulate:
            res = prog.simulate(arch=arch, strategy=point.strategy)
            err = res.check()
            totals = [r.totals() for r in res.regions]
            row.update(
                cycles=int(res.cycles),
                alu_ops=int(sum(t["alu_ops"] for t in totals)),
                mem_bytes=int(sum(t["mem_read_bytes"] + t["mem_write_bytes"] for t in totals)),
                max_abs_error=float(err),
            )
            if res.strategy != point.strategy:  # auto: what it chose
                row["chosen_strategy"] = res.strategy
            if res.split is not None:
                row["split"] = res.split.to_json()
        if prog.plan is not None:
            row["chosen_schedule"] = repr(prog.plan.schedule)
    except FuseflowError as e:
        row["status"] = f"failed: {str(e).splitlines()[0][:300]}"
    except Exception as e:  # a bug must not lose the sweep; the row says what happened
        row["status"] = f"failed: {type(e).__name__}: {e}"[:300]
        row["traceback"] = traceback.format_exc(limit=5)
    row["wall_s"] = round(time.perf_counter() - t0, 3)
    return row
