"""Embedded EventBus: a durable log in one SQLite file.

The file runs in WAL mode with ``synchronous=FULL``, so a ``publish`` that
returned survives kill -9 and power loss, and with a busy timeout, so several
processes can share it (``cogsub publish`` appends while the worker consumes).

Publishes are group-committed: concurrent ``publish`` calls queue up and one
writer appends whatever is queued in a single transaction; every caller's
future resolves only after that transaction committed. ``publish_many``
queues a whole list of records as one entry that lands in one transaction
(all of them or none), with one future for the lot. Partitions are chosen
by ``crc32(key) % partitions``, round-robin when the key is ``None``.

One consumer per group: embedded mode has no rebalancing, so a group is read
by one live consumer at a time. That consumer holds a lease row it renews in
the background; another consumer of the same group gets ``ConfigurationError``
until the owner closes, until ``lease_ttl_s`` after the owner died, or at once
when the owner was a process on this host that no longer exists (kill -9).

Every SQLite call runs off the event loop, on a thread that owns exactly one
connection: one for the bus (writes, stats) and one per consumer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import socket
import sqlite3
import struct
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

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
    CogsubError,
    ConfigurationError,
    ConflictError,
    FieldProblem,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)
from cogsub.core.topics import TopicSpec

T = TypeVar("T")
Slot = tuple[str, int]
_Outcome = list[Published] | Exception

_SCHEMA = """
CREATE TABLE IF NOT EXISTS topics (name TEXT PRIMARY KEY, partitions INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL,
    key BLOB, value BLOB NOT NULL, headers BLOB NOT NULL, timestamp_ms INTEGER NOT NULL,
    PRIMARY KEY (topic, partition, offset));
CREATE TABLE IF NOT EXISTS group_offsets (
    group_name TEXT NOT NULL, topic TEXT NOT NULL, partition INTEGER NOT NULL,
    committed INTEGER NOT NULL, PRIMARY KEY (group_name, topic, partition));
CREATE TABLE IF NOT EXISTS group_leases (
    group_name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_ms INTEGER NOT NULL);
"""
_TRIM = """
DELETE FROM records WHERE timestamp_ms < ?
  AND offset < (SELECT MIN(g.committed) FROM group_offsets AS g
                WHERE g.topic = records.topic AND g.partition = records.partition)
  AND offset < (SELECT MAX(m.offset) FROM records AS m
                WHERE m.topic = records.topic AND m.partition = records.partition)
"""
# A file that is not (or no longer) a database will not heal by retrying.
_PERMANENT_CODES = frozenset(
    {sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT}
)
_LENGTH = struct.Struct(">I")


@contextlib.contextmanager
def _mapped_errors() -> Iterator[None]:
    """Turn sqlite3 exceptions into our errors (the one place this adapter does it)."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        raise ConflictError(f"event log constraint failed: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _PERMANENT_CODES:
            raise ConfigurationError(f"event log file is unusable: {exc}") from exc
        raise UnavailableError(f"event log unavailable: {exc}") from exc
    except OSError as exc:  # only creating the file's directory raises these
        raise ConfigurationError(f"cannot create the event log file: {exc}") from exc


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection, *, write: bool) -> Iterator[None]:
    # IMMEDIATE takes the write lock up front, so offsets read inside stay valid.
    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _encode_headers(headers: Headers) -> bytes:
    parts: list[bytes] = []
    for name, value in headers:
        raw_name = name.encode()
        parts += [_LENGTH.pack(len(raw_name)), raw_name, _LENGTH.pack(len(value)), value]
    return b"".join(parts)


def _decode_headers(blob: bytes) -> Headers:
    headers: list[tuple[str, bytes]] = []
    at = 0
    while at < len(blob):
        (size,) = _LENGTH.unpack_from(blob, at)
        name = blob[at + 4 : at + 4 + size].decode()
        at += 4 + size
        (size,) = _LENGTH.unpack_from(blob, at)
        headers.append((name, blob[at + 4 : at + 4 + size]))
        at += 4 + size
    return tuple(headers)


class _Connection:
    """One SQLite connection living on its own thread; every call runs there."""

    def __init__(self, path: Path, *, busy_timeout_s: float, name: str) -> None:
        self._path = path
        self._busy_timeout_s = busy_timeout_s
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._conn: sqlite3.Connection | None = None

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._call, fn)

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with _mapped_errors():
            if self._conn is None:
                self._conn = self._open()
            return fn(self._conn)

    def _open(self) -> sqlite3.Connection:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self._path, timeout=self._busy_timeout_s, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            # Trimmed records may hold forgotten memories: overwrite their bytes, not just unlink.
            conn.execute("PRAGMA secure_delete=ON")
            conn.executescript(_SCHEMA)
        except BaseException:
            conn.close()
            raise
        return conn

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._close)
        self._executor.shutdown(wait=False)


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
    return _Row(topic, raw_value, raw_key, _encode_headers(record_headers), timestamp_ms)


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
        self._db = _Connection(self.path, busy_timeout_s=busy_timeout_s, name="cogsub-bus")
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

    def _new_connection(self, name: str) -> _Connection:
        return _Connection(self.path, busy_timeout_s=self._busy_timeout_s, name=name)

    async def ensure_topics(self, specs: Sequence[TopicSpec]) -> None:
        """Create missing topics; existing ones keep their partition counts."""
        self._check_open()
        for spec in specs:
            if not spec.name or spec.partitions < 1:
                rule = f"needs a name and at least one partition: {spec!r}"
                raise InvalidInputError([FieldProblem("topic", rule)])

        def create(conn: sqlite3.Connection) -> None:
            with _transaction(conn, write=True):
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
        (published,) = await self._enqueue([_row(topic, value, key, headers, _now_ms())])
        return published

    async def publish_many(self, records: Sequence[OutgoingRecord]) -> list[Published]:
        """Append ``(topic, value, key, headers)`` records, in order, in one transaction.

        Returns where each landed once that transaction committed. Either every
        record is appended or none is (an unknown topic fails the whole call).
        Costs one queue entry and one future however many records it holds.
        """
        self._check_open()
        now = _now_ms()
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
        cutoff_ms = _now_ms() - int(self.retention_s * 1000)

        def delete(conn: sqlite3.Connection) -> int:
            with _transaction(conn, write=True):
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
        with _transaction(conn, write=True):
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
        return _SqliteConsumer(self, tuple(topics), group)

    async def topic_stats(self, topic: str, *, group: str | None = None) -> TopicStats:
        """End offsets of every partition, and ``group``'s committed offsets."""
        self._check_open()

        def read(conn: sqlite3.Connection) -> TopicStats:
            with _transaction(conn, write=False):
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
                Record(topic, partition, off, value, key, _decode_headers(headers), ts)
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


def _owner_id() -> str:
    """``host:pid:nonce``, so a restarted process can see its predecessor died."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"


def _owner_pid(owner: str) -> str:
    """The process id in an owner id, with its host when that is another machine."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return pid if host == socket.gethostname() else f"{pid} on {host}"


def _owner_alive(owner: str) -> bool:
    """False only when the owner ran on this host and its process is gone (kill -9)."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return True  # another machine's lease: only its expiry can tell
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _SqliteConsumer:
    """The single live consumer of a group (see the module docstring)."""

    def __init__(self, bus: SqliteEventBus, topics: tuple[str, ...], group: str) -> None:
        self._bus = bus
        self._topics = topics
        self._group = group
        self._owner = _owner_id()
        self._db = bus._new_connection("cogsub-consumer")
        self._positions: dict[Slot, int] = {}
        self._start_lock = asyncio.Lock()
        self._started = False
        self._heartbeat: asyncio.Task[None] | None = None
        self._lease_error: ConfigurationError | None = None
        self._rotation = 0
        self._empty_at_version: int | None = None
        self._closed = False

    def _take_lease(self, conn: sqlite3.Connection) -> None:
        now = _now_ms()
        row = conn.execute(
            "SELECT owner, expires_ms FROM group_leases WHERE group_name = ?", (self._group,)
        ).fetchone()
        if row is not None and row[0] != self._owner and row[1] > now and _owner_alive(row[0]):
            raise ConfigurationError(
                f"consumer group {self._group!r} already has a live consumer (pid "
                f"{_owner_pid(row[0])}) on {self._bus.path}; embedded mode allows one "
                f"consumer per group (a dead owner's lease expires {self._bus.lease_ttl_s} s "
                "after it stopped)"
            )
        conn.execute(
            "INSERT INTO group_leases (group_name, owner, expires_ms) VALUES (?, ?, ?) "
            "ON CONFLICT (group_name) DO UPDATE SET owner = excluded.owner, "
            "expires_ms = excluded.expires_ms",
            (self._group, self._owner, now + int(self._bus.lease_ttl_s * 1000)),
        )

    def _begin(self, conn: sqlite3.Connection) -> None:
        with _transaction(conn, write=True):
            counts: dict[str, int] = {}
            for topic in self._topics:
                row = conn.execute("SELECT partitions FROM topics WHERE name = ?", (topic,))
                found = row.fetchone()
                if found is None:
                    raise NotFoundError(f"topic {topic!r} does not exist")
                counts[topic] = int(found[0])
            self._take_lease(conn)
            committed = {
                (topic, partition): offset
                for topic, partition, offset in conn.execute(
                    "SELECT topic, partition, committed FROM group_offsets WHERE group_name = ?",
                    (self._group,),
                )
            }
        self._positions = {
            (topic, p): committed.get((topic, p), 0)
            for topic in counts
            for p in range(counts[topic])
        }

    async def _start(self) -> None:
        if self._closed:
            raise UnavailableError(f"consumer of group {self._group!r} is closed")
        if self._lease_error is not None:
            raise self._lease_error
        async with self._start_lock:
            if not self._started:
                await self._db.run(self._begin)
                self._started = True
                self._heartbeat = asyncio.create_task(self._renew_lease())

    async def _renew_lease(self) -> None:
        def renew(conn: sqlite3.Connection) -> None:
            with _transaction(conn, write=True):
                self._take_lease(conn)

        while True:
            await asyncio.sleep(self._bus.lease_ttl_s / 3)
            try:
                await self._db.run(renew)
            except ConfigurationError as exc:
                self._lease_error = exc  # someone took over while we stalled; stop reading
                return
            except CogsubError:
                continue  # the next renewal is still well inside the lease

    def _fetch(self, conn: sqlite3.Connection, max_records: int) -> list[Record]:
        # data_version moves whenever another connection (any process) commits;
        # while it stands still, the last empty answer is still the answer.
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        slots = list(self._positions)
        if not slots or version == self._empty_at_version:
            return []
        self._rotation = (self._rotation + 1) % len(slots)
        active = slots[self._rotation :] + slots[: self._rotation]
        taken: dict[Slot, list[Record]] = {slot: [] for slot in slots}
        remaining = max_records
        with _transaction(conn, write=False):
            # Equal shares per partition, then the leftovers to partitions that had more.
            while remaining > 0 and active:
                share = max(1, remaining // len(active))
                still_full: list[Slot] = []
                for slot in active:
                    limit = min(share, remaining)
                    if limit == 0:
                        break
                    rows = conn.execute(
                        "SELECT offset, key, value, headers, timestamp_ms FROM records "
                        "WHERE topic = ? AND partition = ? AND offset >= ? "
                        "ORDER BY offset LIMIT ?",
                        (*slot, self._positions[slot] + len(taken[slot]), limit),
                    ).fetchall()
                    taken[slot] += [
                        Record(*slot, off, value, key, _decode_headers(headers), ts)
                        for off, key, value, headers, ts in rows
                    ]
                    remaining -= len(rows)
                    if len(rows) == limit:
                        still_full.append(slot)
                active = still_full
        records: list[Record] = []
        for slot, batch in taken.items():
            if batch:
                self._positions[slot] = batch[-1].offset + 1
                records += batch
        self._empty_at_version = None if records else version
        return records

    async def poll(self, *, max_records: int, timeout_s: float) -> list[Record]:
        """Records after this consumer's position, fair across partitions."""
        await self._start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_s, 0.0)
        while True:
            records = await self._db.run(lambda conn: self._fetch(conn, max_records))
            left = deadline - loop.time()
            if records or left <= 0 or max_records <= 0:
                return records
            await self._bus._wait_appended(min(self._bus.poll_interval_s, left))

    async def commit(self, records: Sequence[Record]) -> None:
        """Durably store, per partition, the offset after the highest record given.

        Committed offsets never move backwards, and a consumer that lost its lease
        cannot commit (its records are another consumer's now).
        """
        await self._start()
        upto: dict[Slot, int] = {}
        for record in records:
            slot = (record.topic, record.partition)
            upto[slot] = max(upto.get(slot, 0), record.offset + 1)
        if not upto:
            return

        def store(conn: sqlite3.Connection) -> None:
            with _transaction(conn, write=True):
                self._take_lease(conn)  # a consumer that lost its group must not commit
                conn.executemany(
                    "INSERT INTO group_offsets (group_name, topic, partition, committed) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (group_name, topic, partition) "
                    "DO UPDATE SET committed = MAX(committed, excluded.committed)",
                    [(self._group, *slot, offset) for slot, offset in upto.items()],
                )

        await self._db.run(store)

    async def close(self) -> None:
        """Give the group's lease back without committing anything."""
        if self._closed:
            return
        self._closed = True
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat

        def release(conn: sqlite3.Connection) -> None:
            conn.execute(
                "DELETE FROM group_leases WHERE group_name = ? AND owner = ?",
                (self._group, self._owner),
            )

        with contextlib.suppress(CogsubError):
            if self._started:
                await self._db.run(release)
        await self._db.close()
