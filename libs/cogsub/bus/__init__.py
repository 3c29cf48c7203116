"""The EventBus port and its embedded adapters (SQLite log, in-memory fake)."""

from cogsub.bus.memory import InMemoryBusState, InMemoryEventBus
from cogsub.bus.ports import (
    Consumer,
    EventBus,
    Headers,
    PartitionOffsets,
    Published,
    Record,
    TopicStats,
)
from cogsub.bus.sqlite import SqliteEventBus

__all__ = [
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
