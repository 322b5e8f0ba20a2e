"""Readable views of a detailed result JSON (``SimResult.to_json(detail=True)``).

- `table`: per-region summary (and per-node with `nodes=True`) as rich tables;
- `perfetto`: Chrome/Perfetto trace events: a ``fabric`` process with one track per set of
  regions that never overlap (a slice per region run, its configuration load included), then
  one process per region, one track per node, a slice per active span, at the cycles the
  timeline placed the region;
- `dot`: the dataflow graph of each region with counters on the nodes.
"""

from __future__ import annotations

from typing import Any

from fuseflow.fabric.scheduler import Span, tracks

STALL_KEYS = ("stall_input", "stall_output")


def table(result: dict, nodes: bool = False) -> list:
    """A result JSON as a rich table (`nodes`: one row per node as well)."""
    from rich.table import Table  # rich only when a table or progress bar is shown

    out = []
    total = f"total {result['total_cycles']} cycles"
    if result.get("sampled"):  # a sampled run: the figures are estimates with an interval
        lo, hi = result["interval"]
        total = f"total ~{result['total_cycles']} cycles (sampled {result['sampled']['target']}: {lo}..{hi})"
    t = Table(title=f"{total}, arch {result['arch']}, schedule {result.get('schedule')}")
    for h in ("region", "cycles", "tokens", "alu ops", "reductions", "mem read B", "mem write B"):
        t.add_column(h, justify="left" if h == "region" else "right")
    for r in result["regions"]:
        sampled = r.get("sampled")
        t.add_row(
            r["name"] + (f" (sampled {sampled['units']}/{sampled['total']})" if sampled else ""),
            f"~{r['cycles']}" if sampled else str(r["cycles"]),
            str(r["tokens_out"]),
            str(r["alu_ops"]),
            str(r["reductions"]),
            str(r["mem_read_bytes"]),
            str(r["mem_write_bytes"]),
        )
    out.append(t)
    if nodes:
        for r in result["regions"]:
            if "nodes" not in r:
                continue
            nt = Table(title=f"region {r['name']}")
            for h in ("node", "in", "out", "alu", "stall in", "stall out", "first", "last"):
                nt.add_column(h, justify="left" if h == "node" else "right")
            for n in r["nodes"]:
                nt.add_row(
                    n["name"],
                    str(n["tokens_in"]),
                    str(n["tokens_out"]),
                    str(n["alu_ops"]),
                    str(n["stall_input"]),
                    str(n["stall_output"]),
                    str(n["first_active"]),
                    str(n["last_active"]),
                )
            out.append(nt)
    return out


def perfetto(result: dict) -> dict[str, Any]:
    """Trace Event Format JSON: ts/dur in cycles (shown as microseconds by the viewer)."""

    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "fabric"}}]
    timeline = [
        Span(s["region"], s["start"], s["end"], s["units"], s["reconfig"], s.get("batch"))
        for s in result.get("timeline", [])
    ]
    for s, row in zip(timeline, tracks(timeline)):
        events.append(
            {
                "ph": "X",
                "name": s.label,
                "pid": 0,
                "tid": row,
                "ts": s.start,
                "dur": max(s.end - s.start, 1),
                "args": {"units": s.units, "reconfig": s.reconfig},
            }
        )
    starts = [s.start + s.reconfig for s in timeline if s.batch is None]
    offset = 0
    for pid, r in enumerate(result["regions"], start=1):
        if len(starts) == len(result["regions"]):
            offset = starts[pid - 1]
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": r["name"]}})
        for tid, n in enumerate(r.get("nodes", []), start=1):
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": n["name"]}})
            spans = n.get("spans") or ([(n["first_active"], n["last_active"])] if n["first_active"] >= 0 else [])
            for a, b in spans:
                events.append(
                    {
                        "ph": "X",
                        "name": n["kind"],
                        "pid": pid,
                        "tid": tid,
                        "ts": offset + a,
                        "dur": b - a + 1,
                        "args": {"tokens_out": n["tokens_out"]},
                    }
                )
        offset += r["cycles"]  # older results without a timeline: regions one after another
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": {"unit": "cycles"}}


def dot(result: dict) -> str:
    """A result JSON as a Graphviz graph: a cluster per region, a box per node with its tokens."""
    lines = ["digraph fuseflow {", "  rankdir=TB;", '  node [shape=box, fontname="monospace", fontsize=10];']
    for ri, r in enumerate(result["regions"]):
        lines.append(f'  subgraph cluster_{ri} {{ label="{r["name"]}: {r["cycles"]} cycles";')
        for ni, n in enumerate(r.get("nodes", [])):
            label = f"{n['name']}\\nout {n['tokens_out']}"
            if n["alu_ops"]:
                label += f"  alu {n['alu_ops']}"
            if n["stall_output"]:
                label += f"\\nstall out {n['stall_output']}"
            lines.append(f'    r{ri}n{ni} [label="{label}"];')
        for src, port, dst in r.get("edges", []):
            lines.append(f'    r{ri}n{src} -> r{ri}n{dst} [label="{port}", fontsize=8];')
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"
