"""The embedded index's schema, and the migrations of older files to it.

One file (or ``":memory:"``): ``index_state`` (the last write's ``seq`` and the
vector dimension), ``documents`` (one row per bank and event id; an explicit
integer ``doc_id`` is the rowid because ``VACUUM`` may renumber implicit rowids,
and the FTS tables refer to rows by rowid), ``tombstones``, ``text_tables``,
the per-bank FTS5 tables ``text_N`` (:mod:`.text`) and ``text_store``. ``migrate`` brings a file of
any earlier version to ``SCHEMA_VERSION``, each step in one transaction.
"""

from __future__ import annotations

import sqlite3
import time

import structlog

from cogsub.core.errors import ConfigurationError
from cogsub.index.sqlite.text import TEXT_COLUMNS, text_table_to_write
from cogsub.sqlite_support import transaction

__all__ = ["DOCUMENT_COLUMNS", "SCHEMA", "SCHEMA_VERSION", "migrate"]

_log = structlog.get_logger("cogsub.index.sqlite")

SCHEMA_VERSION = 4
#: The first version whose documents are unique per (bank, event id).
_IDENTITY_PER_BANK_VERSION = 3

DOCUMENT_COLUMNS = """
    doc_id INTEGER PRIMARY KEY,
    event_id TEXT NOT NULL,
    bank_id TEXT NOT NULL,
    fact_type TEXT,
    ts_us INTEGER NOT NULL,
    importance_score REAL NOT NULL,
    tags TEXT NOT NULL,
    seq INTEGER NOT NULL,
    summary TEXT NOT NULL,
    body TEXT NOT NULL,
    embedding BLOB NOT NULL,
    text_seq INTEGER
"""

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS index_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL,
    dimension INTEGER
);
INSERT OR IGNORE INTO index_state (id, seq, dimension) VALUES (1, 0, NULL);
CREATE TABLE IF NOT EXISTS documents ({DOCUMENT_COLUMNS});
-- A document's identity, and a bank in id order: scan pages seek to their cursor instead of
-- sorting the whole bank per page (65 ms a page at 23k documents a bank before).
CREATE UNIQUE INDEX IF NOT EXISTS documents_by_bank_and_id ON documents (bank_id, event_id);
DROP INDEX IF EXISTS documents_by_bank;
-- Covers the text search join, which otherwise reads ~2 KB rows (mostly embedding) per match.
CREATE INDEX IF NOT EXISTS documents_filter
    ON documents (doc_id, bank_id, fact_type, ts_us, importance_score, tags);
CREATE INDEX IF NOT EXISTS documents_by_seq ON documents (seq);
-- A bank's memories of one type in replay order (``scan_in_replay_order``): a round
-- reads its slice without parsing the bank. An expression index: no column to migrate.
CREATE INDEX IF NOT EXISTS documents_in_replay_order ON documents (
    bank_id, fact_type, json_extract(body, '$.decay_factor') DESC, importance_score DESC, event_id
);
-- A bank newest first (``list_newest``): a page seeks to its (ts_us, event_id) cursor and
-- reads on, never sorting the bank. Created on open, so older files gain it too.
CREATE INDEX IF NOT EXISTS documents_newest_first ON documents (bank_id, ts_us, event_id);
-- The same per fact type: a page of one type seeks to it instead of skipping the others.
CREATE INDEX IF NOT EXISTS documents_newest_by_type
    ON documents (bank_id, fact_type, ts_us, event_id);
-- The turns around a hit (``neighbours``); an expression index, so no column to migrate.
CREATE INDEX IF NOT EXISTS documents_by_session
    ON documents (bank_id, json_extract(body, '$.session_id'), ts_us, event_id);
CREATE TABLE IF NOT EXISTS tombstones (
    bank_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (bank_id, event_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tombstones_by_seq ON tombstones (seq);
-- Which FTS5 table (``text_N``) holds a bank's rows; the tables are made as banks appear.
CREATE TABLE IF NOT EXISTS text_tables (
    bank_id TEXT PRIMARY KEY,
    text_table INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS text_tables_by_table ON text_tables (text_table);
-- The file's identity for a tantivy text store beside it (:mod:`.tantivy_text`): a store
-- holding another token was made from another file (a replaced one) and is rebuilt.
CREATE TABLE IF NOT EXISTS text_store (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    token TEXT NOT NULL
);
PRAGMA user_version = {SCHEMA_VERSION};
"""


def migrate(conn: sqlite3.Connection) -> None:
    """Create the schema, or bring an older file to it (a newer one is refused)."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version > SCHEMA_VERSION:
        raise ConfigurationError(
            f"index schema version {version} is newer than this code ({SCHEMA_VERSION})"
        )
    _identity_per_bank(conn)
    conn.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")
    _split_text_by_bank(conn)
    _detail_in_text(conn)
    _text_seq_column(conn)


def _identity_per_bank(conn: sqlite3.Connection) -> None:
    """Rebuild a schema-2 file, where ``event_id`` alone was unique, for per-bank identity.

    The rows keep their ``doc_id`` (the FTS tables' rowids); the tombstones only let
    live caches catch up, and no cache outlives the process that opens an older file.
    One transaction: a crash leaves the old tables whole, and the next open redoes it.
    """
    with transaction(conn, write=True):
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        table = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'documents'"
        if version >= _IDENTITY_PER_BANK_VERSION or conn.execute(table).fetchone() is None:
            return
        started = time.perf_counter()
        conn.execute(f"CREATE TABLE documents_per_bank ({DOCUMENT_COLUMNS})")
        columns = "doc_id, event_id, bank_id, fact_type, ts_us, importance_score, tags, seq,"
        columns += " summary, body, embedding"
        conn.execute(
            f"INSERT INTO documents_per_bank ({columns}) SELECT {columns} FROM documents"  # noqa: S608 - ours
        )
        conn.execute("DROP TABLE documents")
        conn.execute("ALTER TABLE documents_per_bank RENAME TO documents")
        conn.execute("DROP TABLE IF EXISTS tombstones")
        (rows,) = conn.execute("SELECT count(*) FROM documents").fetchone()
    elapsed_ms = round(1000 * (time.perf_counter() - started))
    _log.info("index_identity_per_bank", documents=rows, elapsed_ms=elapsed_ms)


def _split_text_by_bank(conn: sqlite3.Connection) -> None:
    """Move a version-1 file's one FTS table of all banks into tables per bank.

    One transaction: a crash leaves the old table whole, and the next open redoes it.
    """
    with transaction(conn, write=True):
        shared = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'documents_fts'"
        if conn.execute(shared).fetchone() is None:
            return
        started = time.perf_counter()
        banks = [bank for (bank,) in conn.execute("SELECT DISTINCT bank_id FROM documents")]
        for bank_id in banks:
            conn.execute(
                f"INSERT INTO {text_table_to_write(conn, bank_id)} (rowid, summary, tags)"
                " SELECT doc_id, summary,"
                " COALESCE((SELECT group_concat(value, ' ') FROM json_each(d.tags)), '')"
                " FROM documents AS d WHERE bank_id = ?",
                (bank_id,),
            )
        conn.execute("DROP TABLE documents_fts")
    elapsed_ms = round(1000 * (time.perf_counter() - started))
    _log.info("index_text_split_by_bank", banks=len(banks), elapsed_ms=elapsed_ms)


def _detail_in_text(conn: sqlite3.Connection) -> None:
    """Give a version-3 file's FTS tables their ``detail`` column (FTS5 cannot add one).

    Each table is copied into one with the column, empty for these rows: files of
    version 3 and before never stored the text past the summary (``cogsub replay``
    re-derives it from the archive). One transaction: a crash leaves the old tables
    whole, and the next open redoes it.
    """
    with transaction(conn, write=True):
        numbers = conn.execute("SELECT DISTINCT text_table FROM text_tables").fetchall()
        lacking = [
            table
            for table in (f"text_{number}" for (number,) in numbers)
            if "detail" not in _columns_of(conn, table)
        ]
        if not lacking:
            return
        started = time.perf_counter()
        for table in lacking:
            conn.execute(f"CREATE VIRTUAL TABLE {table}_with_detail USING fts5({TEXT_COLUMNS})")
            conn.execute(
                f"INSERT INTO {table}_with_detail (rowid, summary, tags, detail)"  # noqa: S608 - ours
                f" SELECT rowid, summary, tags, '' FROM {table}"
            )
            conn.execute(f"DROP TABLE {table}")
            conn.execute(f"ALTER TABLE {table}_with_detail RENAME TO {table}")
    elapsed_ms = round(1000 * (time.perf_counter() - started))
    _log.info("index_text_detail_added", tables=len(lacking), elapsed_ms=elapsed_ms)


def _columns_of(conn: sqlite3.Connection, table: str) -> set[str]:
    cursor = conn.execute(f"SELECT * FROM {table} LIMIT 0")  # noqa: S608 - ours
    return {column[0] for column in cursor.description}


def _text_seq_column(conn: sqlite3.Connection) -> None:
    """Give an older file ``documents.text_seq``: the write that last changed a row's
    text, tags, type or time (``seq`` also counts writes of signals only). NULL for the
    rows already there: nothing since has changed them. Indexed, as ``seq`` is."""
    with transaction(conn, write=True):
        started = time.perf_counter()
        added = "text_seq" not in _columns_of(conn, "documents")
        if added:
            conn.execute("ALTER TABLE documents ADD COLUMN text_seq INTEGER")
        conn.execute("CREATE INDEX IF NOT EXISTS documents_by_text_seq ON documents (text_seq)")
    if added:
        elapsed_ms = round(1000 * (time.perf_counter() - started))
        _log.info("index_text_seq_added", elapsed_ms=elapsed_ms)
