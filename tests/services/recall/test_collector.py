"""Settling the collector: what is alive at startup is frozen, later garbage still collected."""

from __future__ import annotations

import gc
import weakref

from cogsub.recall.collector import settle_collector


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it


def test_objects_alive_at_settling_are_frozen_and_later_cycles_are_still_collected() -> None:
    try:
        kept = _Node()
        frozen = settle_collector()
        assert frozen == gc.get_freeze_count() > 0
        assert not any(o is kept for o in gc.get_objects())  # out of every generation
        later = _Node()
        gone = weakref.ref(later)
        del later
        gc.collect()
        assert gone() is None
    finally:
        gc.unfreeze()
