import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("TMPDIR", str(ROOT / "build" / "tmp"))
os.makedirs(os.environ["TMPDIR"], exist_ok=True)
sys.path.insert(0, str(ROOT / "examples"))

# Started first, so that with `pytest -n 2` (make test) the other worker runs everything else
# meanwhile instead of waiting for them at the end. Order does not matter to the results.
LONGEST_FIRST = (
    "tests/e2e/test_planner.py::test_gpt_auto_materializes_qkv_and_beats_every_fixed_schedule",
    "tests/e2e/test_applications.py::test_gpt_bigbird_block[full]",
)


def pytest_collection_modifyitems(config, items):
    rank = {nodeid: i for i, nodeid in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid, len(rank)))
