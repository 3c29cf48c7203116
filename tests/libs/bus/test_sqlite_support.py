"""The SQLite helper both embedded adapters share: one error mapping, one transaction."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cogsub.bus.sqlite import SqliteEventBus
from cogsub.core.errors import ConfigurationError, ConflictError, UnavailableError
from cogsub.core.topics import TopicSpec
from cogsub.index.ports import DecayStep
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.sqlite_support import ErrorPolicy, mapped_errors, transaction


def not_a_database(path: Path) -> Path:
    path.write_bytes(b"these bytes are no SQLite header at all" * 200)
    return path


async def test_a_file_that_is_no_database_is_a_configuration_error_for_both(
    tmp_path: Path,
) -> None:
    bus = SqliteEventBus(not_a_database(tmp_path / "bus.sqlite3"))
    with pytest.raises(ConfigurationError, match="event log is unusable"):
        await bus.ensure_topics([TopicSpec("t", 1)])
    await bus.close()
    index = SqliteMemoryIndex(not_a_database(tmp_path / "index.sqlite3"))
    with pytest.raises(ConfigurationError, match="index database is unusable"):
        await index.count()
    await index.close()


async def test_a_write_lock_held_past_the_busy_timeout_is_unavailable_for_both(
    tmp_path: Path,
) -> None:
    bus = SqliteEventBus(tmp_path / "bus.sqlite3", busy_timeout_s=0.05)
    await bus.ensure_topics([TopicSpec("t", 1)])
    index = SqliteMemoryIndex(tmp_path / "index.sqlite3", busy_timeout_s=0.05)
    await index.ensure(dimension=2)
    holders = [
        sqlite3.connect(tmp_path / name, isolation_level=None)
        for name in ("bus.sqlite3", "index.sqlite3")
    ]
    try:
        for holder in holders:
            holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(UnavailableError, match="event log unavailable"):
            await bus.publish("t", b"v")
        with pytest.raises(UnavailableError, match="index database unavailable"):
            step = DecayStep(rate=0.5, floor=0.1, before=datetime.now(UTC))
            await index.decay_page("bank", step, size=10)
    finally:
        for holder in holders:
            holder.close()
        await bus.close()
        await index.close()


def test_a_commit_that_fails_rolls_back_and_leaves_no_transaction_open() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
    conn.execute(
        "CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)"
    )
    # A deferred foreign key is checked at COMMIT: the statement inside succeeds.
    with pytest.raises(sqlite3.IntegrityError), transaction(conn, write=True):
        conn.execute("INSERT INTO child VALUES (7)")
    assert not conn.in_transaction
    with transaction(conn, write=True):  # the connection takes the next one
        conn.execute("INSERT INTO parent VALUES (7)")
    assert conn.execute("SELECT count(*) FROM child").fetchone() == (0,)
    conn.close()


def test_a_constraint_failure_is_a_conflict() -> None:
    policy = ErrorPolicy("test file", frozenset(), other_errors_permanent=False)
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(ConflictError, match="test file constraint failed"), mapped_errors(policy):
        conn.execute("INSERT INTO t VALUES (1)")
    conn.close()
