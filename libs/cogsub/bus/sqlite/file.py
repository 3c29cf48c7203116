"""The event log's file: its schema, the connection every call runs on, the header codec.

The file runs in WAL mode with ``synchronous=FULL``, so a commit that returned
survives kill -9 and power loss, and with a busy timeout, so several processes
can share it. Every SQLite call runs off the event loop, on a thread that owns
exactly one connection: one for the log (writes, stats) and one per consumer.
"""

from __future__ import annotations

import asyncio
import sqlite3
import struct
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from cogsub.bus.ports import Headers
from cogsub.sqlite_support import ErrorPolicy, mapped_errors

T = TypeVar("T")
#: A partition of a topic.
Slot = tuple[str, int]

SCHEMA = """
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
#: A file that is not (or no longer) a database will not heal by retrying; anything
#: else (locked, busy, I/O) may, so it is ``UnavailableError``.
ERRORS = ErrorPolicy(
    subject="event log",
    permanent_codes=frozenset(
        {sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT}
    ),
    other_errors_permanent=False,
)
_LENGTH = struct.Struct(">I")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def encode_headers(headers: Headers) -> bytes:
    parts: list[bytes] = []
    for name, value in headers:
        raw_name = name.encode()
        parts += [_LENGTH.pack(len(raw_name)), raw_name, _LENGTH.pack(len(value)), value]
    return b"".join(parts)


def decode_headers(blob: bytes) -> Headers:
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


class Connection:
    """One SQLite connection living on its own thread; every call runs there."""

    def __init__(self, path: Path, *, busy_timeout_s: float, name: str) -> None:
        self._path = path
        self._busy_timeout_s = busy_timeout_s
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._conn: sqlite3.Connection | None = None

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._call, fn)

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with mapped_errors(ERRORS):
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
            conn.executescript(SCHEMA)
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
