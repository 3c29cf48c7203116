"""The EventBus port: durable topics, consumer groups, commit after effects.

Contract every adapter keeps:

- ``publish`` returns only once the record is durable (acks=all on Kafka, a
  committed SQLite transaction embedded). It raises ``UnavailableError`` when
  the broker cannot take it; a record is never silently dropped.
- ``publish_many`` is ``publish`` for a batch, in one durability step: records
  keep their order (per partition), and every one is checked, topics included,
  before any is appended.
- A consumer of a group resumes after the last offset the group committed.
  Records delivered but not committed are delivered again (at-least-once), to
  the same group, after a restart.
- ``commit`` stores, per partition, the offset after the highest record given.
  Callers commit only after every effect of those records is durable.
- Headers travel with the record unchanged, in order.
- ``read`` looks at a partition from any offset without a group: nothing moves.
- The caller closes what it opens: ``Consumer.close`` and ``EventBus.close``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from cogsub.core.errors import FieldProblem, InvalidInputError
from cogsub.core.headers import Headers as Headers  # re-exported: the adapters import it here
from cogsub.core.topics import TopicSpec

OutgoingRecord = tuple[str, bytes, bytes | None, Mapping[str, bytes] | Headers | None]
"""``(topic, value, key, headers)`` of one record for ``EventBus.publish_many``."""


@dataclass(frozen=True)
class Record:
    """One record as delivered to a consumer."""

    topic: str
    partition: int
    offset: int
    value: bytes
    key: bytes | None = None
    headers: Headers = ()
    timestamp_ms: int = 0

    def header(self, name: str) -> bytes | None:
        """The last value of header ``name``, if any."""
        for key, value in reversed(self.headers):
            if key == name:
                return value
        return None


@dataclass(frozen=True)
class PartitionOffsets:
    """Where a partition stands: its end, and where a group has committed to."""

    topic: str
    partition: int
    end_offset: int
    committed: int | None = None

    @property
    def lag(self) -> int:
        return self.end_offset - (self.committed or 0)


@dataclass(frozen=True)
class Published:
    topic: str
    partition: int
    offset: int


@dataclass
class TopicStats:
    topic: str
    partitions: list[PartitionOffsets] = field(default_factory=list)

    @property
    def end_offset(self) -> int:
        return sum(p.end_offset for p in self.partitions)

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.partitions)


class Consumer(Protocol):
    """A member of a consumer group reading one or more topics."""

    async def poll(self, *, max_records: int, timeout_s: float) -> list[Record]:
        """Up to ``max_records`` records, waiting at most ``timeout_s`` for the first."""
        ...

    async def commit(self, records: Sequence[Record]) -> None:
        """Mark ``records`` (and everything before them per partition) as done."""
        ...

    async def close(self) -> None:
        """Leave the group without committing anything more."""
        ...


class EventBus(Protocol):
    """Publish to and consume from durable topics."""

    async def ensure_topics(self, specs: Sequence[TopicSpec]) -> None:
        """Create missing topics with their partition counts; existing ones are left alone."""
        ...

    async def publish(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: Mapping[str, bytes] | Headers | None = None,
    ) -> Published:
        """Append one record durably and say where it landed."""
        ...

    async def publish_many(self, records: Sequence[OutgoingRecord]) -> list[Published]:
        """Append ``records`` durably, in order, and say where each landed (``[]`` for none).

        Costs one durability step (a transaction, one delivery wait) however many
        records it holds, which is what makes it worth having beside ``publish``.
        Raises ``InvalidInputError`` or ``NotFoundError`` (an unknown topic) before
        anything is appended. On ``UnavailableError`` the embedded buses appended
        nothing; on Kafka the records acknowledged before the failure stay, so a
        retry may duplicate them (consumers are at-least-once anyway).
        """
        ...

    def consumer(self, topics: Sequence[str], *, group: str) -> Consumer:
        """A new member of ``group`` reading ``topics`` from the group's committed offsets."""
        ...

    async def topic_stats(self, topic: str, *, group: str | None = None) -> TopicStats:
        """End offsets per partition, and the group's committed offsets when a group is given."""
        ...

    async def read(
        self, topic: str, partition: int, *, offset: int, max_records: int, timeout_s: float = 0.0
    ) -> list[Record]:
        """Up to ``max_records`` records of one partition from ``offset`` on, in offset order.

        Joins no group and commits nothing, so reading never moves any consumer (dead
        letters are read this way). Records retention has removed are skipped; waits at
        most ``timeout_s`` for the first record. ``NotFoundError`` for an unknown topic
        or partition.
        """
        ...

    async def close(self) -> None:
        """Release connections; consumers made by this bus must be closed first."""
        ...


def _as_bytes(value: object) -> bytes | None:
    return bytes(value) if isinstance(value, bytes | bytearray | memoryview) else None


def checked_record(
    value: object, key: object, headers: Mapping[str, bytes] | Headers | None
) -> tuple[bytes, bytes | None, Headers]:
    """Validate a record to publish and return it as plain bytes; every adapter calls this.

    Raises ``InvalidInputError`` naming each broken part, before anything is sent.
    """
    problems = []
    raw_value = _as_bytes(value)
    if raw_value is None:
        problems.append(FieldProblem("value", "must be bytes"))
    raw_key = None if key is None else _as_bytes(key)
    if key is not None and raw_key is None:
        problems.append(FieldProblem("key", "must be bytes or None"))
    raw_headers: list[tuple[str, bytes]] = []
    for name, header_value in normalize_headers(headers):
        raw = _as_bytes(header_value)
        if not isinstance(name, str) or raw is None:
            problems.append(FieldProblem("headers", "names must be str, values bytes"))
            break
        raw_headers.append((name, raw))
    if problems or raw_value is None:
        raise InvalidInputError(problems)
    return raw_value, raw_key, tuple(raw_headers)


def normalize_headers(headers: Mapping[str, bytes] | Headers | None) -> Headers:
    if headers is None:
        return ()
    if isinstance(headers, Mapping):
        return tuple(headers.items())
    return tuple(headers)
