"""The embedded index's connections: one writer thread, two readers, the log's debt.

Writes, vector searches and the vector cache live on one worker thread per
index, which also serialises the index's writes; lookups, text searches,
neighbours, scans and counts run on ``READERS`` reader threads, each with a
read-only connection of its own (a file in WAL mode, where readers and the
writer never wait for each other; ``":memory:"`` keeps one connection, so there
everything runs on the worker thread).

A forget empties the write-ahead log (``truncate_wal``) so that no old frame
keeps the forgotten text. A reader in the log makes that wait and give up; the
truncate is then owed, and later calls (reads too) retry it without waiting.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

import structlog

from cogsub.index.ports import SearchFilters
from cogsub.index.sqlite.schema import migrate
from cogsub.sqlite_support import ErrorPolicy, mapped_errors

__all__ = [
    "READERS",
    "TRUNCATE_RETRY_S",
    "WAL_CHECKPOINT_PAGES",
    "Connections",
    "IndexConnection",
    "TextEngine",
]

_T = TypeVar("_T")
_log = structlog.get_logger("cogsub.index.sqlite")

#: Reader threads (each with its own connection) beside the one writer thread.
READERS = 2
#: Page caches: the readers hold the hot FTS pages the searches walk (~100k docs'
#: worth each); the writer's pages are the ones its inserts and merges touch.
#: 32 + 2 x 48 MiB bound the index's caches, whatever the data.
_READER_CACHE_MIB = 48
_WRITER_CACHE_MIB = 32
#: WAL pages before a commit folds the log into the file (SQLite's default is 1,000).
#: A page written again before the checkpoint is copied once: index and text pages are
#: rewritten by batch after batch. 10,000 wrote 15-16 % less to the device and took
#: 16-22 % less time than 1,000 for extraction-like batches on 200k documents
#: (``make bench-index-writes``, two runs).
WAL_CHECKPOINT_PAGES = 10_000
#: Seconds between tries at a truncate a forget could not finish (a reader held the log).
#: Each try that cannot truncate still checkpoints what it can, like a passive checkpoint.
TRUNCATE_RETRY_S = 1.0
#: Only a file that cannot be opened, or is no database, is a lasting failure; locked,
#: busy or I/O errors may pass.
ERRORS = ErrorPolicy(
    subject="index database",
    permanent_codes=frozenset({sqlite3.SQLITE_CANTOPEN}),
    other_errors_permanent=True,
)


def _nothing(conn: sqlite3.Connection) -> None:
    """A call that only makes the worker open its connection."""


class TextEngine(Protocol):
    """A text arm kept outside SQLite and derived from its rows (:mod:`.tantivy_text`)."""

    def open(self, conn: sqlite3.Connection) -> None:
        """Bring the engine level with the file, on the writer's connection as it opens."""

    def rank(
        self, conn: sqlite3.Connection, terms: list[str], filters: SearchFilters, size: int
    ) -> list[tuple[int, float]] | None:
        """``(doc_id, score)`` of the best ``size`` rows of ``conn``'s snapshot.

        ``None``: the engine lacks commits the snapshot holds, so the FTS5 tables answer.
        """
        ...

    def catch_up_in(self) -> float | None:
        """Seconds until a catch-up a write put off falls due (0 or less: due; ``None``: none
        owed); read on any thread."""
        ...

    def catch_up_owed(self, conn: sqlite3.Connection, *, closing: bool = False) -> None:
        """Pay that catch-up (``closing``: due or not), on the writer's connection; never
        raises."""


class IndexConnection(sqlite3.Connection):
    """A connection that carries the index's text engine, for ``text.rank_text`` to ask.

    ``None``: the FTS5 tables in the file answer.
    """

    text_engine: TextEngine | None = None


class Connections:
    """The writer thread and its connection, the reader pool, and an owed WAL truncate.

    Args:
        path: The database file (its directory must exist) or ``":memory:"``.
        busy_timeout_s: How long a write waits for another process's write lock.
        checkpoint_pages: Pages the write-ahead log holds before a commit checkpoints it.
    """

    def __init__(
        self,
        path: str,
        *,
        busy_timeout_s: float,
        checkpoint_pages: int,
        text_engine: TextEngine | None = None,
    ) -> None:
        self._path = path
        self._text_engine = text_engine
        self._busy_timeout_ms = int(busy_timeout_s * 1000)
        self._checkpoint_pages = checkpoint_pages
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cogsub-index")
        # Reads run on reader threads with connections of their own (WAL readers never
        # wait for the writer), so lookups queue neither behind a write's sync nor, with
        # two, behind one slow text search. A private in-memory database has one
        # connection only, so there everything stays on the worker thread.
        self._reader = (
            None
            if self._path == ":memory:"
            else ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="cogsub-index-read")
        )
        self._closed = False
        # Touched only on the worker thread.
        self._conn: sqlite3.Connection | None = None
        # One connection per reader thread, each used only by its own thread.
        self._local = threading.local()
        self._read_conns: list[sqlite3.Connection] = []
        self._read_conns_lock = threading.Lock()
        self._writer_opened = False
        # A forget whose log truncate found a reader: the log may still hold the
        # forgotten text, so later calls try again (monotonic time of the next try;
        # set on the worker thread, read by read() as a hint).
        self._truncate_owed_at: float | None = None
        self._truncate_queued = False  # a read has queued a retry the writer has not run yet
        self._catch_up_queued = False  # a call is queued to pay the text engine's catch-up
        self._catch_up_reminder: asyncio.TimerHandle | None = None

    async def write(self, fn: Callable[..., _T], *args: Any) -> _T:
        if self._closed:
            raise RuntimeError("this SqliteMemoryIndex is closed")
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._executor, self._call, fn, args)
        self._remind_catch_up(loop)
        return result

    def _remind_catch_up(self, loop: asyncio.AbstractEventLoop) -> None:
        """A catch-up a write put off is paid when due even if nothing else calls by then."""
        due_in = None if self._text_engine is None else self._text_engine.catch_up_in()
        if due_in is not None and self._catch_up_reminder is None:
            self._catch_up_reminder = loop.call_later(max(due_in, 0.0), self._reminded)

    def _reminded(self) -> None:
        self._catch_up_reminder = None
        self._queue_catch_up()

    def _queue_catch_up(self) -> None:
        """A call on the writer, not waited for: it pays the text engine's catch-up if due."""
        if not self._closed and not self._catch_up_queued:
            self._catch_up_queued = True
            self._executor.submit(self._call, _nothing, ())

    def _call(self, fn: Callable[..., _T], args: tuple[Any, ...]) -> _T:
        with mapped_errors(ERRORS):
            if self._conn is None:
                self._conn = self._open()
            result = fn(self._conn, *args)
            if self._truncate_due():
                self._retry_truncate(self._conn)
            self._catch_up_queued = False
            if self._text_engine is not None:
                self._text_engine.catch_up_owed(self._conn)
            return result

    def _truncate_due(self) -> bool:
        # Read once: the worker thread may clear it between two reads.
        owed_at = self._truncate_owed_at
        return owed_at is not None and time.monotonic() >= owed_at

    async def read(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run a read-only ``fn`` on a reader connection (the worker's, in memory)."""
        if self._reader is None:
            return await self.write(fn, *args)
        if self._closed:
            raise RuntimeError("this SqliteMemoryIndex is closed")
        if not self._writer_opened:
            # The writer switches a new file to WAL and creates the schema; switching
            # the journal mode does not wait for busy_timeout, so readers open after it.
            await self.write(_nothing)
            self._writer_opened = True
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._reader, self._read_call, fn, args)
        # After the read, which would otherwise be in the log the retry needs empty.
        if self._truncate_due() and not self._truncate_queued and not self._closed:
            # Recall-only traffic retries it too, on the writer thread, not waited for.
            self._truncate_queued = True
            self._executor.submit(self._call, _nothing, ())
        due_in = None if self._text_engine is None else self._text_engine.catch_up_in()
        if due_in is not None and due_in <= 0:
            self._queue_catch_up()  # likewise a text catch-up writes put off, nothing writing
        return result

    def _read_call(self, fn: Callable[..., _T], args: tuple[Any, ...]) -> _T:
        with mapped_errors(ERRORS):
            conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
            if conn is None:
                # read() opened the writer first (WAL, schema); close() closes this
                # connection after the pool has stopped.
                conn = self._open_reader()
                self._local.conn = conn
                with self._read_conns_lock:
                    self._read_conns.append(conn)
            return fn(conn, *args)

    def _open_reader(self) -> sqlite3.Connection:
        """A read-only connection to the file the writer has set up (WAL, schema)."""
        conn = sqlite3.connect(
            self._path, isolation_level=None, check_same_thread=False, factory=IndexConnection
        )
        conn.text_engine = self._text_engine
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            conn.execute(f"PRAGMA cache_size = -{_READER_CACHE_MIB * 1024}")
            conn.execute("PRAGMA query_only = ON")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, isolation_level=None, factory=IndexConnection)
        conn.text_engine = self._text_engine
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            if self._path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
                # FULL: an acknowledged upsert survives power loss, not only a crash.
                conn.execute("PRAGMA synchronous = FULL")
                conn.execute(f"PRAGMA wal_autocheckpoint = {self._checkpoint_pages}")
            conn.execute(f"PRAGMA cache_size = -{_WRITER_CACHE_MIB * 1024}")
            # ON, not FAST: a forget frees whole FTS segment pages (purge_text), and FAST
            # leaves pages moved to the freelist as they were, forgotten text included.
            conn.execute("PRAGMA secure_delete = ON")
            migrate(conn)
            if self._text_engine is not None:
                # Repairs a crash between a SQLite commit and the engine's (or a lost store).
                self._text_engine.open(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def truncate_wal(self, conn: sqlite3.Connection) -> None:
        """Fold the log into the file and empty it, so no old frame keeps deleted text.

        A reader (a worker process) in the log makes it wait up to the busy timeout
        and give up; the truncate is then owed, and retried by later calls.
        """
        if self._path == ":memory:":
            return
        self._settle_truncate(done=self._checkpoint_truncating(conn))

    def _retry_truncate(self, conn: sqlite3.Connection) -> None:
        """Try an owed truncate without waiting: a busy log must not stall the write path.

        Never raises: it runs after a call whose work is committed.
        """
        try:
            conn.execute("PRAGMA busy_timeout = 0")
            try:
                done = self._checkpoint_truncating(conn, quiet=True)
            finally:
                conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        except sqlite3.Error as exc:
            _log.warning("index_wal_not_truncated", path=self._path, error=str(exc))
            done = False
        self._settle_truncate(done=done)

    def _settle_truncate(self, *, done: bool) -> None:
        """Clear the debt (saying so, if there was one) or owe it for another try."""
        self._truncate_queued = False
        if not done:
            self._truncate_owed_at = time.monotonic() + TRUNCATE_RETRY_S
        elif self._truncate_owed_at is not None:
            self._truncate_owed_at = None
            _log.info("index_wal_truncated", path=self._path)

    def _checkpoint_truncating(self, conn: sqlite3.Connection, *, quiet: bool = False) -> bool:
        """``PRAGMA wal_checkpoint(TRUNCATE)``; whether the log is now empty."""
        try:
            (busy, _, _) = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.OperationalError as exc:
            # The delete is committed: failing the call now would make a retry count 0.
            if not quiet:
                _log.warning("index_wal_not_truncated", path=self._path, error=str(exc))
            return False
        if busy and not quiet:
            _log.warning("index_wal_not_truncated", path=self._path, retry_s=TRUNCATE_RETRY_S)
        return not busy

    async def close(self) -> None:
        """Close every connection and stop the threads (idempotent)."""
        if self._closed:
            return
        # Refuse new work first, so nothing queued after _close reopens the database.
        self._closed = True
        if self._catch_up_reminder is not None:
            self._catch_up_reminder.cancel()  # _close pays what is owed
            self._catch_up_reminder = None
        loop = asyncio.get_running_loop()
        if self._reader is not None:
            await asyncio.to_thread(self._reader.shutdown, wait=True)
            self._close_readers()
        await loop.run_in_executor(self._executor, self._close)
        await asyncio.to_thread(self._executor.shutdown, wait=True)

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._text_engine is not None:
            self._text_engine.catch_up_owed(conn, closing=True)
        try:
            if self._truncate_owed_at is not None:
                # Waits up to the busy timeout: the last chance this index has.
                if self._checkpoint_truncating(conn, quiet=True):
                    _log.info("index_wal_truncated", path=self._path)
                else:
                    # Another process still reads the log: a later forget or checkpoint folds it.
                    _log.warning("index_wal_truncate_still_owed", path=self._path)
        except sqlite3.Error as exc:
            _log.warning("index_wal_truncate_still_owed", path=self._path, error=str(exc))
        finally:
            self._truncate_owed_at = None
            conn.close()

    def _close_readers(self) -> None:
        # The reader threads have stopped: no connection is in use any more.
        with self._read_conns_lock:
            conns, self._read_conns = self._read_conns, []
        for conn in conns:
            conn.close()
