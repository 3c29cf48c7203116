"""The leased consumer of the event log: one live consumer per group.

Embedded mode has no rebalancing, so a group is read by one live consumer at a
time. That consumer holds a lease row it renews in the background; another
consumer of the same group gets ``ConfigurationError`` until the owner closes,
until ``lease_ttl_s`` after the owner died, or at once when the owner was a
process on this host that no longer exists (kill -9).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sqlite3
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from cogsub.bus.ports import Record
from cogsub.bus.sqlite.file import Connection, Slot, decode_headers, now_ms
from cogsub.core.errors import CogsubError, ConfigurationError, NotFoundError, UnavailableError
from cogsub.sqlite_support import transaction

__all__ = ["LeasedConsumer"]


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


class LeasedConsumer:
    """The single live consumer of a group (see the module docstring).

    Args:
        path: The log's file, named in errors.
        topics: The topics it reads, every partition of each.
        group: The consumer group whose lease and offsets it holds.
        connection: Its own connection (thread) to the log's file.
        lease_ttl_s: How long the lease outlives a consumer that stopped renewing it.
        poll_interval_s: How often a waiting ``poll`` looks for other processes' records.
        wait_appended: Waits (at most the given seconds) for the log to append a record.
    """

    def __init__(
        self,
        path: Path,
        topics: tuple[str, ...],
        group: str,
        *,
        connection: Connection,
        lease_ttl_s: float,
        poll_interval_s: float,
        wait_appended: Callable[[float], Awaitable[None]],
    ) -> None:
        self._path = path
        self._topics = topics
        self._group = group
        self._lease_ttl_s = lease_ttl_s
        self._poll_interval_s = poll_interval_s
        self._wait_appended = wait_appended
        self._owner = _owner_id()
        self._db = connection
        self._positions: dict[Slot, int] = {}
        self._start_lock = asyncio.Lock()
        self._started = False
        self._heartbeat: asyncio.Task[None] | None = None
        self._lease_error: ConfigurationError | None = None
        self._rotation = 0
        self._empty_at_version: int | None = None
        self._closed = False

    def _take_lease(self, conn: sqlite3.Connection) -> None:
        now = now_ms()
        row = conn.execute(
            "SELECT owner, expires_ms FROM group_leases WHERE group_name = ?", (self._group,)
        ).fetchone()
        if row is not None and row[0] != self._owner and row[1] > now and _owner_alive(row[0]):
            raise ConfigurationError(
                f"consumer group {self._group!r} already has a live consumer (pid "
                f"{_owner_pid(row[0])}) on {self._path}; embedded mode allows one "
                f"consumer per group (a dead owner's lease expires {self._lease_ttl_s} s "
                "after it stopped)"
            )
        conn.execute(
            "INSERT INTO group_leases (group_name, owner, expires_ms) VALUES (?, ?, ?) "
            "ON CONFLICT (group_name) DO UPDATE SET owner = excluded.owner, "
            "expires_ms = excluded.expires_ms",
            (self._group, self._owner, now + int(self._lease_ttl_s * 1000)),
        )

    def _begin(self, conn: sqlite3.Connection) -> None:
        with transaction(conn, write=True):
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
            with transaction(conn, write=True):
                self._take_lease(conn)

        while True:
            await asyncio.sleep(self._lease_ttl_s / 3)
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
        with transaction(conn, write=False):
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
                        Record(*slot, off, value, key, decode_headers(headers), ts)
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
            await self._wait_appended(min(self._poll_interval_s, left))

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
            with transaction(conn, write=True):
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
