import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("TMPDIR", str(ROOT / "build" / "tmp"))
os.makedirs(os.environ["TMPDIR"], exist_ok=True)
sys.path.insert(0, str(ROOT / "examples"))
