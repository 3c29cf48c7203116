"""The cyclic garbage collector kept off recall's tail in a serving process.

A full (oldest-generation) collection walks every object the process holds: at
startup that is the imported modules, the embedding model and the index's caches,
tens of thousands of objects that live as long as the process. On the LoCoMo
banks such a collection took ~65 ms of CPU in the middle of some recall, once in
~900 recalls. Frozen after startup, those objects are never walked again and the
same collection took ~6 ms. Objects made later are collected as before.
"""

from __future__ import annotations

import gc

__all__ = ["settle_collector"]


def settle_collector() -> int:
    """Collect once, then exempt everything still alive from later collections.

    Call once the process has built what it serves with (after startup). Returns
    how many objects were frozen.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
