"""Small runs: `simulate()` wall time on small programs with the packed-input cache off and on,
interleaved in one process (the packing of parameters and inputs is reused between calls of one
program, `sim/pack_cache.py`). Prints one line per case: the median milliseconds per call.

    python benchmarks/small_runs.py
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
os.environ.setdefault("TMPDIR", str(ROOT / "build" / "tmp"))
os.makedirs(os.environ["TMPDIR"], exist_ok=True)

import fuseflow  # noqa: E402
from fuseflow.model_files import example  # noqa: E402
from fuseflow.sim import pack_cache  # noqa: E402

gcn = example("gcn", EXAMPLES)
gpt_bigbird = example("gpt_bigbird", EXAMPLES)

CASES = {
    "GCN karate, unfused": gcn.build,
    "GPT-BigBird seq 32 d 16, unfused": lambda: gpt_bigbird.build(seq=32, d_model=16, heads=2, d_ff=32, block=16),
}
ROUNDS, CALLS = 3, 15


def main() -> None:
    limit = pack_cache.LIMIT_BYTES
    print("| case | regions | simulate ms, cache off | cache on |\n|---|---:|---:|---:|")
    for name, build in CASES.items():
        model, args, formats = build()
        prog = fuseflow.compile(model, args, formats=formats, schedule="unfused")
        ref = prog.simulate().cycles
        times: dict[str, list[float]] = {"off": [], "on": []}
        for _ in range(ROUNDS):  # interleaved: the VM's drift hits both alike
            for mode in ("off", "on"):
                pack_cache.LIMIT_BYTES = 0 if mode == "off" else limit
                pack_cache.clear()
                prog.simulate()
                for _ in range(CALLS):
                    t = time.perf_counter()
                    res = prog.simulate()
                    times[mode].append(time.perf_counter() - t)
                    assert res.cycles == ref  # the same run either way
        off, on = (1000 * statistics.median(times[m]) for m in ("off", "on"))
        print(f"| {name} | {len(prog.graphs)} | {off:.2f} | {on:.2f} |", flush=True)
    pack_cache.LIMIT_BYTES = limit


if __name__ == "__main__":
    main()
