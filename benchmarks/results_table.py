"""Render the study JSONs in docs/results/ as markdown tables (for docs/results.md)."""

import json
import sys
from pathlib import Path


def table(path: Path) -> str:
    r = json.loads(path.read_text())
    lines = [
        f"`{r['model']}` options {r['options']} arch `{r['arch']}`",
        "",
        "| schedule | regions | cycles | speedup vs unfused | ALU ops (FLOPs) | memory bytes | max abs err |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in r["schedules"]:
        if "error" in s:
            lines.append(f"| {s['schedule']} | | failed: {s['error'][:90]} | | | | |")
            continue
        lines.append(
            f"| {s['schedule']} | {s['regions']} | {s['cycles']:,} | {s['speedup_vs_unfused']} | "
            f"{s['alu_ops']:,} | {s['mem_read_bytes'] + s['mem_write_bytes']:,} | {s['max_abs_error']:.1e} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(table(Path(p)))
