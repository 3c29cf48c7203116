"""The event log's writer: topics, group-committed appends, retention, stats and reads.

Publishes are group-committed: concurrent ``publish`` calls queue up and one
writer appends whatever is queued in a single transaction; every caller's
future resolves only after that transaction committed. ``publish_many``
queues a whole list of records as one entry that lands in one transaction
(all of them or none), with one future for the lot. Partitions are chosen
by ``crc32(key) % partitions``, round-robin when the key is ``None``.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import sqlite3
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

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
from cogsub.bus.sqlite.consumer import LeasedConsumer
from cogsub.bus.sqlite.file import Connection, Slot, decode_headers, encode_headers, now_ms
from cogsub.core.errors import (
    ConfigurationError,
    FieldProblem,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)
from cogsub.core.topics import TopicSpec
from cogsub.sqlite_support import transaction

__all__ = ["SqliteEventBus"]

_Outcome = list[Published] | Exception
_TRIM = """
DELETE FROM records WHERE timestamp_ms < ?
  AND offset < (SELECT MIN(g.committed) FROM group_offsets AS g
                WHERE g.topic = records.topic AND g.partition = records.partition)
  AND offset < (SELECT MAX(m.offset) FROM records AS m
                WHERE m.topic = records.topic AND m.partition = records.partition)
"""


@dataclass(frozen=True)
class _Row:
    topic: str
    value: bytes
    key: bytes | None
    headers: bytes
    timestamp_ms: int


def _row(
    topic: str,
    value: object,
    key: object,
    headers: Mapping[str, bytes] | Headers | None,
    timestamp_ms: int,
) -> _Row:
    """A checked record ready to append (``InvalidInputError`` before anything queues)."""
    raw_value, raw_key, record_headers = checked_record(value, key, headers)
    return _Row(topic, raw_value, raw_key, encode_headers(record_headers), timestamp_ms)


@dataclass(frozen=True)
class _Pending:
    """One caller's records: they land in one transaction, and one future answers."""

    rows: list[_Row]
    future: asyncio.Future[list[Published]]


class SqliteEventBus:
    """An EventBus over one SQLite file that several processes may share.

    Args:
        path: The database file; created (with its directory) on first use.
        busy_timeout_s: How long a call waits for another process's write lock
            before raising ``UnavailableError``.
        lease_ttl_s: How long a group stays locked after its consumer died.
        poll_interval_s: How often a waiting ``poll`` looks for records that
            another process appended (records published through this bus wake
            it at once).
        max_batch: The most publishes one transaction takes.
        retention_s: Records older than this are deleted once every group that
            reads their partition has committed past them (``None``: kept for
            ever). A partition's newest record always stays: it carries the
            partition's next offset. Checked at most every ``trim_every_s``
            seconds, after a publish.
        trim_every_s: How often publishing may trigger a trim.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_s: float = 10.0,
        lease_ttl_s: float = 15.0,
        poll_interval_s: float = 0.02,
        max_batch: int = 5000,
        retention_s: float | None = None,
        trim_every_s: float = 300.0,
    ) -> None:
        if retention_s is not None and retention_s < 0:
            raise ConfigurationError("retention_s must not be negative")
        self.retention_s = retention_s
        self._trim_every_s = trim_every_s
        self._trimmed_at = time.monotonic()
        self.path = Path(path)
        self.lease_ttl_s = lease_ttl_s
        self.poll_interval_s = poll_interval_s
        self._busy_timeout_s = busy_timeout_s
        self._max_batch = max_batch
        self._db = Connection(self.path, busy_timeout_s=busy_timeout_s, name="cogsub-bus")
        self._partitions: dict[str, int] = {}  # safe to cache: counts never change
        self._round_robin = itertools.count()
        self._pending: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        self._waiters: set[asyncio.Future[None]] = set()
        self._closed = False
        self._write_transactions = 0

    @property
    def write_transactions(self) -> int:
        """How many publish transactions this bus committed (group commit makes it small)."""
        return self._write_transactions

    def _check_open(self) -> None:
        if self._closed:
            raise UnavailableError(f"event bus on {self.path} is closed")

    def _new_connection(self, name: str) -> Connection:
        return Connection(self.path, busy_timeout_s=self._busy_timeout_s, name=name)

    async def ensure_topics(self, specs: Sequence[TopicSpec]) -> None:
        """Create missing topics; existing ones keep their partition counts."""
        self._check_open()
        for spec in specs:
            if not spec.name or spec.partitions < 1:
                rule = f"needs a name and at least one partition: {spec!r}"
                raise InvalidInputError([FieldProblem("topic", rule)])

        def create(conn: sqlite3.Connection) -> None:
            with transaction(conn, write=True):
                conn.executemany(
                    "INSERT INTO topics (name, partitions) VALUES (?, ?) "
                    "ON CONFLICT (name) DO NOTHING",
                    [(spec.name, spec.partitions) for spec in specs],
                )

        await self._db.run(create)

    async def publish(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: Mapping[str, bytes] | Headers | None = None,
    ) -> Published:
        """Append one record; returns after the transaction holding it committed."""
        self._check_open()
        (published,) = await self._enqueue([_row(topic, value, key, headers, now_ms())])
        return published

    async def publish_many(self, records: Sequence[OutgoingRecord]) -> list[Published]:
        """Append ``(topic, value, key, headers)`` records, in order, in one transaction.

        Returns where each landed once that transaction committed. Either every
        record is appended or none is (an unknown topic fails the whole call).
        Costs one queue entry and one future however many records it holds.
        """
        self._check_open()
        now = now_ms()
        rows = [_row(topic, value, key, headers, now) for topic, value, key, headers in records]
        return await self._enqueue(rows) if rows else []

    async def _enqueue(self, rows: list[_Row]) -> list[Published]:
        future: asyncio.Future[list[Published]] = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(rows, future))
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush())
        return await future

    def _next_batch(self) -> list[_Pending]:
        """Queued entries up to ``max_batch`` records (at least one entry, never split)."""
        taken = 0
        size = 0
        for item in self._pending:
            if taken and size + len(item.rows) > self._max_batch:
                break
            taken += 1
            size += len(item.rows)
        batch = self._pending[:taken]
        del self._pending[:taken]
        return batch

    async def _flush(self) -> None:
        # Whatever queued up while the previous transaction ran goes into the next one.
        try:
            while self._pending:
                batch = self._next_batch()
                outcomes: Sequence[_Outcome]
                try:
                    outcomes = await self._db.run(functools.partial(self._append, batch=batch))
                except Exception as exc:
                    outcomes = [exc] * len(batch)
                for item, outcome in zip(batch, outcomes, strict=True):
                    if item.future.done():  # the caller was cancelled
                        continue
                    if isinstance(outcome, Exception):
                        item.future.set_exception(outcome)
                    else:
                        item.future.set_result(outcome)
                self._notify_appended()
                # Inside the loop: publishes queued during the trim are flushed by this task.
                if self.retention_s is not None and self._trim_due():
                    await self.trim()
        finally:
            self._flusher = None

    def _trim_due(self) -> bool:
        return time.monotonic() - self._trimmed_at >= self._trim_every_s

    async def trim(self) -> int:
        """Delete the records retention lets go (see ``retention_s``); how many went.

        A record goes only when it is older than the retention, every group that
        committed on its partition is past it, and a newer record exists in the
        partition. A partition no group ever committed on is kept whole, so
        records published before their consumer first ran are never lost.
        """
        self._check_open()
        self._trimmed_at = time.monotonic()
        if self.retention_s is None:
            return 0
        cutoff_ms = now_ms() - int(self.retention_s * 1000)

        def delete(conn: sqlite3.Connection) -> int:
            with transaction(conn, write=True):
                deleted = conn.execute(_TRIM, (cutoff_ms,)).rowcount
            return int(deleted)

        return await self._db.run(delete)

    def _partition_count(self, conn: sqlite3.Connection, topic: str) -> int | None:
        count = self._partitions.get(topic)
        if count is None:
            row = conn.execute("SELECT partitions FROM topics WHERE name = ?", (topic,)).fetchone()
            if row is None:
                return None  # not cached: another process may create it later
            count = self._partitions[topic] = int(row[0])
        return count

    def _partition_counts(self, conn: sqlite3.Connection, topics: set[str]) -> dict[str, int]:
        """Partition counts of ``topics``; ``NotFoundError`` names one that does not exist."""
        counts: dict[str, int] = {}
        for topic in sorted(topics):
            count = self._partition_count(conn, topic)
            if count is None:
                raise NotFoundError(f"topic {topic!r} does not exist")
            counts[topic] = count
        return counts

    def _append(self, conn: sqlite3.Connection, batch: list[_Pending]) -> list[_Outcome]:
        outcomes: list[_Outcome] = []
        rows: list[tuple[object, ...]] = []
        next_offsets: dict[Slot, int] = {}
        with transaction(conn, write=True):
            for item in batch:
                try:
                    counts = self._partition_counts(conn, {row.topic for row in item.rows})
                except NotFoundError as exc:  # an entry lands whole or not at all
                    outcomes.append(exc)
                    continue
                published: list[Published] = []
                for row in item.rows:
                    count = counts[row.topic]
                    if row.key is None:
                        partition = next(self._round_robin) % count
                    else:
                        partition = zlib.crc32(row.key) % count
                    slot = (row.topic, partition)
                    offset = next_offsets.get(slot)
                    if offset is None:
                        offset = conn.execute(
                            "SELECT COALESCE(MAX(offset) + 1, 0) FROM records "
                            "WHERE topic = ? AND partition = ?",
                            slot,
                        ).fetchone()[0]
                    next_offsets[slot] = offset + 1
                    rows.append((*slot, offset, row.key, row.value, row.headers, row.timestamp_ms))
                    published.append(Published(row.topic, partition, offset))
                outcomes.append(published)
            conn.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        self._write_transactions += 1
        return outcomes

    def _notify_appended(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _wait_appended(self, timeout_s: float) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.add(waiter)
        try:
            await asyncio.wait([waiter], timeout=timeout_s)
        finally:
            self._waiters.discard(waiter)

    def consumer(self, topics: Sequence[str], *, group: str) -> Consumer:
        """The consumer of ``group``; it takes the group's lease on first use."""
        self._check_open()
        return LeasedConsumer(
            self.path,
            tuple(topics),
            group,
            connection=self._new_connection("cogsub-consumer"),
            lease_ttl_s=self.lease_ttl_s,
            poll_interval_s=self.poll_interval_s,
            wait_appended=self._wait_appended,
        )

    async def topic_stats(self, topic: str, *, group: str | None = None) -> TopicStats:
        """End offsets of every partition, and ``group``'s committed offsets."""
        self._check_open()

        def read(conn: sqlite3.Connection) -> TopicStats:
            with transaction(conn, write=False):
                count = self._partition_count(conn, topic)
                if count is None:
                    raise NotFoundError(f"topic {topic!r} does not exist")
                committed: dict[int, int] = {}
                if group is not None:
                    committed = dict(
                        conn.execute(
                            "SELECT partition, committed FROM group_offsets "
                            "WHERE group_name = ? AND topic = ?",
                            (group, topic),
                        ).fetchall()
                    )
                stats = TopicStats(topic)
                for partition in range(count):
                    # One indexed MAX per partition instead of scanning the topic.
                    (end,) = conn.execute(
                        "SELECT COALESCE(MAX(offset) + 1, 0) FROM records "
                        "WHERE topic = ? AND partition = ?",
                        (topic, partition),
                    ).fetchone()
                    stats.partitions.append(
                        PartitionOffsets(topic, partition, end, committed.get(partition))
                    )
                return stats

        return await self._db.run(read)

    async def read(
        self, topic: str, partition: int, *, offset: int, max_records: int, timeout_s: float = 0.0
    ) -> list[Record]:
        """Records of one partition from ``offset`` on, joining no group (no lease, no commit)."""
        self._check_open()

        def fetch(conn: sqlite3.Connection) -> list[Record]:
            count = self._partition_count(conn, topic)
            if count is None or not 0 <= partition < count:
                raise NotFoundError(f"topic {topic!r} has no partition {partition}")
            rows = conn.execute(
                "SELECT offset, key, value, headers, timestamp_ms FROM records "
                "WHERE topic = ? AND partition = ? AND offset >= ? ORDER BY offset LIMIT ?",
                (topic, partition, offset, max(max_records, 0)),
            ).fetchall()
            return [
                Record(topic, partition, off, value, key, decode_headers(headers), ts)
                for off, key, value, headers, ts in rows
            ]

        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_s, 0.0)
        while True:
            records = await self._db.run(fetch)
            left = deadline - loop.time()
            if records or left <= 0 or max_records <= 0:
                return records
            await self._wait_appended(min(self.poll_interval_s, left))

    async def close(self) -> None:
        """Wait for queued publishes to commit, then close the connection."""
        if self._closed:
            return
        self._closed = True
        if self._flusher is not None:
            await self._flusher
        await self._db.close()
