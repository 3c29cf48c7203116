"""In-memory EventBus: the same semantics as the durable adapters, without durability.

A ``InMemoryEventBus`` keeps its log in a ``InMemoryBusState``. Buses built over the
same state object behave like reopening one durable log, which is how tests
check restart behaviour (commit then resume, redelivery of uncommitted records)
without a file. Like the embedded SQLite bus, a group has one live consumer at
a time; a second one gets ``ConfigurationError`` until the first is closed.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cogsub.bus.ports import (
    Consumer,
    Headers,
    OutgoingRecord,
    PartitionOffsets,
    Published,
    Record,
    TopicStats,
    checked_record,
)
from cogsub.core.errors import (
    ConfigurationError,
    FieldProblem,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)
from cogsub.core.topics import TopicSpec

Slot = tuple[str, int]


@dataclass
class InMemoryBusState:
    """The log that survives a ``InMemoryEventBus`` being closed and built again."""

    topics: dict[str, list[list[Record]]] = field(default_factory=dict)
    committed: dict[tuple[str, str, int], int] = field(default_factory=dict)
    owners: dict[str, object] = field(default_factory=dict)
    waiters: set[asyncio.Future[None]] = field(default_factory=set)

    def notify(self) -> None:
        """Wake every consumer waiting for a record."""
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)


class InMemoryEventBus:
    """An EventBus held in memory; pass one ``state`` to several buses to "reopen" it."""

    def __init__(self, *, state: InMemoryBusState | None = None) -> None:
        self.state = state if state is not None else InMemoryBusState()
        self._round_robin = itertools.count()
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise UnavailableError("memory event bus is closed")

    def _partitions(self, topic: str) -> list[list[Record]]:
        partitions = self.state.topics.get(topic)
        if partitions is None:
            raise NotFoundError(f"topic {topic!r} does not exist")
        return partitions

    async def ensure_topics(self, specs: Sequence[TopicSpec]) -> None:
        """Create missing topics; existing ones keep their partition counts."""
        self._check_open()
        for spec in specs:
            if not spec.name or spec.partitions < 1:
                rule = f"needs a name and at least one partition: {spec!r}"
                raise InvalidInputError([FieldProblem("topic", rule)])
        for spec in specs:
            self.state.topics.setdefault(spec.name, [[] for _ in range(spec.partitions)])

    async def publish(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: Mapping[str, bytes] | Headers | None = None,
    ) -> Published:
        """Append one record and say where it landed."""
        (published,) = await self.publish_many([(topic, value, key, headers)])
        return published

    async def publish_many(self, records: Sequence[OutgoingRecord]) -> list[Published]:
        """Append ``(topic, value, key, headers)`` records in order: all of them or none."""
        self._check_open()
        checked = [
            (topic, *checked_record(value, key, headers)) for topic, value, key, headers in records
        ]
        logs = [self._partitions(topic) for topic, *_ in checked]  # every topic, before any append
        timestamp_ms = time.time_ns() // 1_000_000
        published: list[Published] = []
        for (topic, value, key, normalized), partitions in zip(checked, logs, strict=True):
            if key is None:
                partition = next(self._round_robin) % len(partitions)
            else:
                partition = zlib.crc32(key) % len(partitions)
            log = partitions[partition]
            offset = len(log)
            log.append(Record(topic, partition, offset, value, key, normalized, timestamp_ms))
            published.append(Published(topic, partition, offset))
        if published:
            self.state.notify()
        return published

    def consumer(self, topics: Sequence[str], *, group: str) -> Consumer:
        """The consumer of ``group``; it claims the group on first use."""
        self._check_open()
        return _InMemoryConsumer(self.state, tuple(topics), group)

    async def topic_stats(self, topic: str, *, group: str | None = None) -> TopicStats:
        """End offsets of every partition, and ``group``'s committed offsets."""
        self._check_open()
        stats = TopicStats(topic)
        for partition, log in enumerate(self._partitions(topic)):
            committed = (
                None if group is None else self.state.committed.get((group, topic, partition))
            )
            stats.partitions.append(PartitionOffsets(topic, partition, len(log), committed))
        return stats

    async def read(
        self, topic: str, partition: int, *, offset: int, max_records: int, timeout_s: float = 0.0
    ) -> list[Record]:
        """Records of one partition from ``offset`` on, joining no group."""
        self._check_open()
        log = _partition(self._partitions(topic), topic, partition)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_s, 0.0)
        while True:
            records = log[max(offset, 0) : max(offset, 0) + max(max_records, 0)]
            left = deadline - loop.time()
            if records or left <= 0 or max_records <= 0:
                return records
            waiter = loop.create_future()
            self.state.waiters.add(waiter)
            try:
                await asyncio.wait([waiter], timeout=left)
            finally:
                self.state.waiters.discard(waiter)

    async def close(self) -> None:
        """Mark the bus closed; the state stays for the next bus built on it."""
        self._closed = True


def _partition(partitions: list[list[Record]], topic: str, partition: int) -> list[Record]:
    if not 0 <= partition < len(partitions):
        raise NotFoundError(f"topic {topic!r} has no partition {partition}")
    return partitions[partition]


class _InMemoryConsumer:
    """The single live consumer of a group."""

    def __init__(self, state: InMemoryBusState, topics: tuple[str, ...], group: str) -> None:
        self._state = state
        self._topics = topics
        self._group = group
        self._positions: dict[Slot, int] | None = None
        self._rotation = 0
        self._closed = False

    def _start(self) -> dict[Slot, int]:
        if self._closed:
            raise UnavailableError(f"consumer of group {self._group!r} is closed")
        if self._positions is None:
            slots: list[Slot] = []
            for topic in self._topics:
                partitions = self._state.topics.get(topic)
                if partitions is None:
                    raise NotFoundError(f"topic {topic!r} does not exist")
                slots += [(topic, p) for p in range(len(partitions))]
            owner = self._state.owners.get(self._group)
            if owner is not None and owner is not self:
                raise ConfigurationError(
                    f"consumer group {self._group!r} already has a live consumer; "
                    "embedded mode allows one consumer per group"
                )
            self._state.owners[self._group] = self
            committed = self._state.committed
            self._positions = {s: committed.get((self._group, *s), 0) for s in slots}
        return self._positions

    def _take(self, positions: dict[Slot, int], max_records: int) -> list[Record]:
        slots = list(positions)
        if not slots or max_records <= 0:
            return []
        self._rotation = (self._rotation + 1) % len(slots)
        order = slots[self._rotation :] + slots[: self._rotation]
        taken = dict.fromkeys(slots, 0)
        remaining = max_records
        progressed = True
        # Round-robin one record at a time: fair across partitions, ordered within one.
        while remaining > 0 and progressed:
            progressed = False
            for slot in order:
                end = len(self._state.topics[slot[0]][slot[1]])
                if remaining > 0 and positions[slot] + taken[slot] < end:
                    taken[slot] += 1
                    remaining -= 1
                    progressed = True
        records: list[Record] = []
        for (topic, partition), count in taken.items():
            start = positions[(topic, partition)]
            records += self._state.topics[topic][partition][start : start + count]
            positions[(topic, partition)] = start + count
        return records

    async def poll(self, *, max_records: int, timeout_s: float) -> list[Record]:
        """Records after this consumer's position, waiting up to ``timeout_s`` for the first."""
        positions = self._start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_s, 0.0)
        while True:
            records = self._take(positions, max_records)
            left = deadline - loop.time()
            if records or left <= 0 or max_records <= 0:
                return records
            waiter = loop.create_future()
            self._state.waiters.add(waiter)
            try:
                await asyncio.wait([waiter], timeout=left)
            finally:
                self._state.waiters.discard(waiter)

    async def commit(self, records: Sequence[Record]) -> None:
        """Store, per partition, the offset after the highest record given."""
        self._start()
        upto: dict[Slot, int] = {}
        for record in records:
            slot = (record.topic, record.partition)
            upto[slot] = max(upto.get(slot, 0), record.offset + 1)
        for (topic, partition), offset in upto.items():
            self._state.committed[(self._group, topic, partition)] = offset

    async def close(self) -> None:
        """Give the group back without committing anything."""
        self._closed = True
        if self._state.owners.get(self._group) is self:
            del self._state.owners[self._group]
