"""Pin the public names of ``cogsub.bus``."""

from __future__ import annotations

import cogsub.bus


def test_public_names_are_pinned_and_sorted() -> None:
    assert cogsub.bus.__all__ == [
        "Consumer",
        "EventBus",
        "Headers",
        "InMemoryBusState",
        "InMemoryEventBus",
        "PartitionOffsets",
        "Published",
        "Record",
        "SqliteEventBus",
        "TopicStats",
    ]
    assert cogsub.bus.__all__ == sorted(cogsub.bus.__all__)
    assert all(hasattr(cogsub.bus, name) for name in cogsub.bus.__all__)
