"""The collector during a compile: the heap that existed before it is set aside.

A compile runs with torch, torch-mlir and the user's model already in memory (~420k objects for
GPT-3 Small's one decoder), and builds a few hundred thousand short-lived ones. Each full
collection the new objects trigger rescans the old ones too: 0.15-0.3 s each, 0.3-0.6 s of a
4 s GPT-3 Small compile. `gc.freeze` moves them out of the collector's reach until
`gc.unfreeze`; they are not collected in between, which a compile does not need.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def old_objects_frozen() -> Iterator[None]:
    """Freeze the collector's view of the objects alive now, unfreeze on exit. Does nothing
    when some are already frozen (the caller's own `gc.freeze`, or an enclosing compile): an
    unfreeze here would undo theirs."""
    if gc.get_freeze_count() or not gc.isenabled():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
