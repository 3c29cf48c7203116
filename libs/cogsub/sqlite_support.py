"""What the SQLite adapters (event log, memory index) share: error mapping and transactions.

Both adapters turn sqlite3 exceptions into the project's errors in one place and run
their statements in explicit transactions. They differ only in what they call their
file and in which failures no retry can heal; each states that as an ``ErrorPolicy``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass

from cogsub.core.errors import ConfigurationError, ConflictError, UnavailableError

__all__ = ["ErrorPolicy", "mapped_errors", "transaction"]


@dataclass(frozen=True)
class ErrorPolicy:
    """How one adapter's sqlite3 exceptions become ours.

    Args:
        subject: What the file is, in messages ("event log", "index database").
        permanent_codes: SQLite primary result codes (an extended code counts as its
            primary one) that no retry heals: ``ConfigurationError``. Any other
            ``OperationalError`` is ``UnavailableError`` (locked, busy, disk I/O).
        other_errors_permanent: Whether a ``DatabaseError`` that is not an
            ``OperationalError`` and has none of ``permanent_codes`` is permanent too
            (``ConfigurationError``), rather than ``UnavailableError``.
    """

    subject: str
    permanent_codes: frozenset[int]
    other_errors_permanent: bool

    def is_permanent(self, exc: sqlite3.DatabaseError) -> bool:
        if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in self.permanent_codes:
            return True
        return self.other_errors_permanent and not isinstance(exc, sqlite3.OperationalError)


@contextlib.contextmanager
def mapped_errors(policy: ErrorPolicy) -> Iterator[None]:
    """Turn sqlite3 exceptions (and a failure to create the file's directory) into ours."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        raise ConflictError(f"{policy.subject} constraint failed: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        if policy.is_permanent(exc):
            raise ConfigurationError(f"{policy.subject} is unusable: {exc}") from exc
        raise UnavailableError(f"{policy.subject} unavailable: {exc}") from exc
    except OSError as exc:  # sqlite3 raises none: only creating a directory does
        raise ConfigurationError(f"cannot create the {policy.subject} file: {exc}") from exc


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection, *, write: bool) -> Iterator[None]:
    """One explicit transaction on a connection opened with ``isolation_level=None``.

    A write takes the write lock up front (``BEGIN IMMEDIATE``), so what it reads
    inside stays valid until it commits, across processes. A failure, of the commit
    too, rolls back whatever SQLite has not rolled back itself already.
    """
    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
