"""The row store: inserts, patches, decay and deletes of documents, in SQL.

``documents`` has one row per (``bank_id``, ``event_id``) with the IndexDocument
JSON (minus the embedding), the filter columns, the embedding as a float32 BLOB
and ``seq``, the write transaction that last touched the row; ``tombstones``
keep ``seq`` of deleted rows, so that other connections' vector caches catch up
incrementally (``caught_up``). Every write here runs in one transaction and
answers a ``Written``: what the vector cache of the connection that wrote must
do once it committed.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

import structlog
from pydantic import TypeAdapter, ValidationError

from cogsub.core.documents import IndexDocument
from cogsub.core.errors import ConfigurationError, FieldProblem, InvalidInputError, NotFoundError
from cogsub.index.ports import DecayedPage, DecayStep, DocumentPatch
from cogsub.index.sqlite.columns import (
    CACHE_ROW_COLUMNS,
    STORED_DETAIL,
    CacheRow,
    document,
    epoch_us,
    prepared,
    timestamp_us,
)
from cogsub.index.sqlite.reads import BY_IDS_IN_BANK
from cogsub.index.sqlite.text import (
    delete_text,
    insert_text,
    purge_text,
    text_table,
    text_table_to_write,
)
from cogsub.index.sqlite.vectors import VectorCache
from cogsub.sqlite_support import transaction

_T = TypeVar("_T")
_log = structlog.get_logger("cogsub.index.sqlite")
#: Rows a vector cache reads from the file at a time.
_LOAD_CHUNK = 4096


def _unchanged(vectors: VectorCache) -> None:
    """No change to the vector cache."""


@dataclass(frozen=True)
class Written(Generic[_T]):
    """A committed write: its answer, its ``seq`` (``None``: nothing changed) and what
    the writer's vector cache does about it; ``erased``: rows went, so the log must be
    emptied of their text; ``text_changed``: what a text engine outside the file indexes
    (text, tags, type, time) may have changed, not only signals."""

    answer: _T
    seq: int | None = None
    apply: Callable[[VectorCache], object] = _unchanged
    erased: bool = False
    text_changed: bool = True


#: The document's own rule for decay_factor, for patches written in SQL.
_DECAY_FACTOR: TypeAdapter[float] = TypeAdapter(
    Annotated[float, *IndexDocument.model_fields["decay_factor"].metadata]
)


def ensure_dimension(conn: sqlite3.Connection, dimension: int) -> None:
    """Record the vector dimension; ``ConfigurationError`` if another one is recorded."""
    with transaction(conn, write=True):
        (recorded,) = conn.execute("SELECT dimension FROM index_state").fetchone()
        if recorded is None:
            conn.execute("UPDATE index_state SET dimension = ?", (dimension,))
        elif recorded != dimension:
            raise ConfigurationError(
                f"the index holds {recorded}-dimensional vectors, not {dimension}"
            )


def upsert(conn: sqlite3.Connection, documents: list[IndexDocument]) -> Written[None]:
    """Insert or replace documents by (bank, event id), all in one transaction.

    Raises:
        ConfigurationError: an embedding whose length is not the index's dimension.
        InvalidInputError: a timestamp that is not ISO-8601, or a non-finite embedding.
    """
    checked = [prepared(index, doc) for index, doc in enumerate(documents)]
    with transaction(conn, write=True):
        seq, dimension = conn.execute("SELECT seq + 1, dimension FROM index_state").fetchone()
        if dimension is None:
            dimension = len(documents[0].embedding)
            if dimension == 0:
                raise ConfigurationError("document embeddings must not be empty")
            conn.execute("UPDATE index_state SET dimension = ?", (dimension,))
        for doc in documents:
            if len(doc.embedding) != dimension:
                raise ConfigurationError(
                    f"document {doc.event_id} has a {len(doc.embedding)}-dimensional"
                    f" embedding; the index holds {dimension}-dimensional vectors"
                )
        rows = _write_all(conn, documents, checked, seq)
        conn.execute("UPDATE index_state SET seq = ?", (seq,))
    return Written(None, seq, lambda vectors: vectors.put(rows))


def update(
    conn: sqlite3.Connection, bank_id: str, event_id: str, patch: DocumentPatch
) -> Written[IndexDocument]:
    """Apply ``patch`` atomically; the new document (``NotFoundError``: no such document)."""
    with transaction(conn, write=True):
        (seq,) = conn.execute("SELECT seq + 1 FROM index_state").fetchone()
        patched = _patch_row(conn, bank_id, event_id, patch, seq)
        if patched is None:
            raise NotFoundError(f"no document {event_id} in bank {bank_id}")
        conn.execute("UPDATE index_state SET seq = ?", (seq,))
    return Written(patched.doc, seq, patched.apply, text_changed=patched.cache_row is not None)


def update_across(
    conn: sqlite3.Connection, by_bank: dict[str, dict[str, DocumentPatch]]
) -> Written[int]:
    """Every bank's patches (bank → id → patch) in one transaction; how many were found."""
    patched: list[_Patched] = []
    in_sql = 0  # rows patched by a statement, not one by one
    with transaction(conn, write=True):
        (seq,) = conn.execute("SELECT seq + 1 FROM index_state").fetchone()
        for bank_id, patches in by_bank.items():
            decays = {i: p.decay_factor for i, p in patches.items() if _sets_only_decay(p)}
            in_sql += _set_decay(conn, bank_id, decays, seq)
            counts = {i: p.retrieval_count_increment for i, p in patches.items() if _counts_only(p)}
            in_sql += _count_retrievals(conn, bank_id, counts, seq)
            patched += [
                done
                for event_id, patch in patches.items()
                if event_id not in decays
                and event_id not in counts
                and (done := _patch_row(conn, bank_id, event_id, patch, seq)) is not None
            ]
        if not (patched or in_sql):
            return Written(0)
        conn.execute("UPDATE index_state SET seq = ?", (seq,))

    def apply(vectors: VectorCache) -> None:
        for done in patched:
            done.apply(vectors)

    retagged = any(done.cache_row is not None for done in patched)
    return Written(len(patched) + in_sql, seq, apply, text_changed=retagged)


def delete_many(conn: sqlite3.Connection, bank_id: str, event_ids: list[str]) -> Written[int]:
    """Remove the bank's documents ``event_ids`` (distinct) in one transaction; how many.

    The rows, their FTS entries and their vectors go together; other connections
    catch up from the tombstones written in the same transaction.
    """
    with transaction(conn, write=True):
        # One JSON parameter however long the list: no bound-parameter limit to chunk for.
        found: list[tuple[int, str]] = conn.execute(
            f"SELECT doc_id, event_id FROM documents WHERE {BY_IDS_IN_BANK}",
            (bank_id, json.dumps(event_ids)),
        ).fetchall()
        if not found:
            return Written(0)
        (seq,) = conn.execute("SELECT seq + 1 FROM index_state").fetchone()
        doc_ids = (json.dumps([doc_id for doc_id, _ in found]),)
        conn.execute(
            "DELETE FROM documents WHERE doc_id IN (SELECT value FROM json_each(?))", doc_ids
        )
        table = text_table(conn, bank_id)
        if table is not None:
            delete_text(conn, table, [doc_id for doc_id, _ in found])
        insert_rows(
            conn,
            "INSERT OR REPLACE INTO tombstones (bank_id, event_id, seq) VALUES (?, ?, ?)",
            [(bank_id, event_id, seq) for _, event_id in found],
        )
        conn.execute("UPDATE index_state SET seq = ?", (seq,))
        if table is not None:
            purge_text(conn, table)
    gone = [event_id for _, event_id in found]
    return Written(len(found), seq, lambda vectors: vectors.remove_all(bank_id, gone), erased=True)


def caught_up(conn: sqlite3.Connection, vectors: VectorCache | None) -> VectorCache | None:
    """``vectors`` with what other connections committed since its ``seq``, or built
    from every row when ``None``; ``None`` while the index has no dimension yet."""
    with transaction(conn, write=False):
        seq, dimension = conn.execute("SELECT seq, dimension FROM index_state").fetchone()
        if dimension is None:
            return None
        if vectors is None:
            began = time.perf_counter()
            vectors = VectorCache(dimension, seq)
            counts = conn.execute("SELECT bank_id, count(*) FROM documents GROUP BY bank_id")
            vectors.reserve(dict(counts.fetchall()))
            _put_all(vectors, conn.execute(f"SELECT {CACHE_ROW_COLUMNS} FROM documents"))
            elapsed_ms = round((time.perf_counter() - began) * 1000)
            _log.info("index_vectors_loaded", documents=vectors.used, elapsed_ms=elapsed_ms)
        elif seq != vectors.seq:
            deleted = conn.execute(
                "SELECT bank_id, event_id FROM tombstones WHERE seq > ?", (vectors.seq,)
            ).fetchall()
            for bank_id, event_id in deleted:
                vectors.remove(bank_id, event_id)
            _put_all(
                vectors,
                conn.execute(
                    f"SELECT {CACHE_ROW_COLUMNS} FROM documents WHERE seq > ?", (vectors.seq,)
                ),
            )
    vectors.seq = seq
    return vectors


def _put_all(vectors: VectorCache, cursor: sqlite3.Cursor) -> None:
    while chunk := cursor.fetchmany(_LOAD_CHUNK):
        vectors.put(chunk)


def decay_page(
    conn: sqlite3.Connection, bank_id: str, step: DecayStep, size: int, after: str | None
) -> DecayedPage:
    # The whole step in SQL: reading each document out to patch it spent most of a
    # round's time under load. No cache holds decay_factor, so seq stays as it is
    # (other connections have nothing to catch up on).
    start = "" if after is None else "AND event_id > ?"
    bounds = (bank_id,) if after is None else (bank_id, after)
    with transaction(conn, write=True):
        (last,) = conn.execute(
            "SELECT max(event_id) FROM (SELECT event_id FROM documents"  # noqa: S608 - ours
            f" WHERE bank_id = ? {start} ORDER BY event_id LIMIT ?)",
            (*bounds, size),
        ).fetchone()
        if last is None:
            return DecayedPage(0, None)
        # 17 digits (the ! asks for more than 16): SQLite writes a REAL into JSON with 15,
        # which may be another double than the one computed.
        factor = "json_extract(body, '$.decay_factor')"
        decayed = f"max(?, min(1.0, {factor}) * ?)"
        cursor = conn.execute(
            f"UPDATE documents SET body = json_set(body, '$.decay_factor',"  # noqa: S608 - ours
            f" json(printf('%!.17g', {decayed})))"
            f" WHERE bank_id = ? {start} AND event_id <= ? AND ts_us < ?"
            f" AND {factor} > ? AND {decayed} <> {factor}",
            (
                step.floor,
                step.rate,
                *bounds,
                last,
                epoch_us(step.before),
                step.floor,
                step.floor,
                step.rate,
            ),
        )
    return DecayedPage(int(cursor.rowcount), str(last))


#: What a row's FTS entry holds, as stored on ``documents AS d`` (tags as JSON).
_TEXT_OF_D = f"d.summary, d.tags, {STORED_DETAIL}"
_INSERT_DOCUMENTS = (
    "INSERT INTO documents (bank_id, fact_type, ts_us, importance_score, tags, seq, text_seq,"
    " summary, body, embedding, event_id, doc_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPDATE_DOCUMENT = (
    "UPDATE documents SET bank_id = ?, fact_type = ?, ts_us = ?, importance_score = ?,"
    " tags = ?, seq = ?, text_seq = ?, summary = ?, body = ?, embedding = ? WHERE doc_id = ?"
)


def _stored_body(doc: IndexDocument) -> str:
    """The JSON stored for ``doc``: without the embedding (a BLOB), nor an empty detail."""
    return doc.model_dump_json(exclude={"embedding"} if doc.detail else {"embedding", "detail"})


def _write_all(
    conn: sqlite3.Connection,
    documents: Sequence[IndexDocument],
    encoded: Sequence[tuple[int, bytes]],
    seq: int,
) -> list[CacheRow]:
    """Insert or update documents and their FTS rows; returns them as ``CACHE_ROW_COLUMNS``.

    One lookup and one ``executemany`` per kind of change for the whole batch,
    instead of four statements per document: an ingestion batch is hundreds of
    new documents, and each statement is a round trip through the sqlite3 module.
    """
    ids = [(doc.bank_id, doc.event_id) for doc in documents]
    if len(set(ids)) != len(ids):  # a later copy must see the earlier one: one at a time
        return [
            _write(conn, doc, ts_us, blob, seq)
            for doc, (ts_us, blob) in zip(documents, encoded, strict=True)
        ]
    found: dict[tuple[str, str], tuple[int, tuple[str, str, str]]] = {
        (bank_id, event_id): (doc_id, (summary, tags, detail))
        for event_id, doc_id, bank_id, summary, tags, detail in conn.execute(
            f"SELECT d.event_id, d.doc_id, d.bank_id, {_TEXT_OF_D} FROM json_each(?) AS j"
            " JOIN documents AS d"
            " ON d.bank_id = json_extract(j.value, '$[0]')"
            " AND d.event_id = json_extract(j.value, '$[1]')",
            (json.dumps(ids),),
        )
    }
    # New rows take the ids SQLite itself would give them (one past the largest).
    (next_id,) = conn.execute("SELECT COALESCE(MAX(doc_id), 0) + 1 FROM documents").fetchone()
    inserts: list[tuple[Any, ...]] = []
    updates: list[tuple[Any, ...]] = []
    stale: dict[str, list[int]] = {}
    texts: dict[str, list[tuple[int, str, str, str]]] = {}
    rows: list[CacheRow] = []
    for doc, (ts_us, blob) in zip(documents, encoded, strict=True):
        fact, tags, values = _columns(doc, ts_us, blob, seq)
        old = found.get((doc.bank_id, doc.event_id))
        if old is None:
            doc_id = next_id
            next_id += 1
            inserts.append((*values, doc.event_id, doc_id))
            fts_stale = True
        else:
            doc_id, old_text = old
            updates.append((*values, doc_id))
            fts_stale = old_text != (doc.summary, tags, doc.detail)
            if fts_stale:
                stale.setdefault(doc.bank_id, []).append(doc_id)
        if fts_stale:
            texts.setdefault(doc.bank_id, []).append(
                (doc_id, doc.summary, " ".join(doc.tags), doc.detail)
            )
        rows.append(
            (doc_id, doc.event_id, doc.bank_id, fact, ts_us, doc.importance_score, tags, blob)
        )
    if inserts:
        insert_rows(conn, _INSERT_DOCUMENTS, inserts)
        conn.execute(
            "DELETE FROM tombstones WHERE (bank_id, event_id) IN"
            " (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))",
            (json.dumps([[row[0], row[-2]] for row in inserts]),),
        )
    if updates:
        conn.executemany(_UPDATE_DOCUMENT, updates)
    for bank_id, bank_texts in texts.items():
        table = text_table_to_write(conn, bank_id)
        if bank_id in stale:
            delete_text(conn, table, stale[bank_id])
        insert_rows(conn, insert_text(table), bank_texts)
    return rows


#: Rows per multi-row INSERT: well inside SQLite's bound-parameter limit (32,766 at least).
_ROWS_PER_INSERT = 500


def insert_rows(conn: sqlite3.Connection, insert: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """``insert`` (ending in one ``VALUES (...)`` group) for many rows, a few statements in all.

    One multi-row statement is one step for the sqlite3 module, where ``executemany``
    steps once per row and gives up and takes back the GIL each time: with the
    worker's other threads busy, those hand-overs cost more than the inserts.
    """
    head, _, group = insert.rpartition(" VALUES ")
    for start in range(0, len(rows), _ROWS_PER_INSERT):
        chunk = rows[start : start + _ROWS_PER_INSERT]
        values = ", ".join([group] * len(chunk))
        conn.execute(f"{head} VALUES {values}", [value for row in chunk for value in row])


def _columns(
    doc: IndexDocument, ts_us: int, blob: bytes, seq: int
) -> tuple[str | None, str, tuple[Any, ...]]:
    """``fact_type``, ``tags`` (JSON) and the stored columns of ``doc`` in update order."""
    fact = None if doc.fact_type is None else doc.fact_type.value
    tags = json.dumps(doc.tags)
    body = _stored_body(doc)
    return (
        fact,
        tags,
        (doc.bank_id, fact, ts_us, doc.importance_score, tags, seq, seq, doc.summary, body, blob),
    )


def _write(
    conn: sqlite3.Connection, doc: IndexDocument, ts_us: int, blob: bytes, seq: int
) -> CacheRow:
    """Insert or update one document and its FTS row; returns it as ``CACHE_ROW_COLUMNS``."""
    fact, tags, values = _columns(doc, ts_us, blob, seq)
    found = conn.execute(
        f"SELECT d.doc_id, {_TEXT_OF_D} FROM documents AS d WHERE bank_id = ? AND event_id = ?",
        (doc.bank_id, doc.event_id),
    ).fetchone()
    if found is None:
        (doc_id,) = conn.execute(
            "INSERT INTO documents (bank_id, fact_type, ts_us, importance_score, tags, seq,"
            " text_seq, summary, body, embedding, event_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " RETURNING doc_id",
            (*values, doc.event_id),
        ).fetchone()
        conn.execute(
            "DELETE FROM tombstones WHERE bank_id = ? AND event_id = ?",
            (doc.bank_id, doc.event_id),
        )
        fts_stale = True
    else:
        doc_id, *old_text = found
        conn.execute(_UPDATE_DOCUMENT, (*values, doc_id))
        fts_stale = tuple(old_text) != (doc.summary, tags, doc.detail)
    if fts_stale:
        table = text_table_to_write(conn, doc.bank_id)
        if found is not None:
            delete_text(conn, table, [doc_id])
        conn.execute(insert_text(table), (doc_id, doc.summary, " ".join(doc.tags), doc.detail))
    return (doc_id, doc.event_id, doc.bank_id, fact, ts_us, doc.importance_score, tags, blob)


def _sets_only_decay(patch: DocumentPatch) -> bool:
    factor = patch.decay_factor
    return factor is not None and patch == DocumentPatch(decay_factor=factor)


def _set_decay(
    conn: sqlite3.Connection, bank_id: str, factors: dict[str, float | None], seq: int
) -> int:
    """Set ``decay_factor`` in the stored JSON, in SQL; how many of the bank's rows had one.

    A round's decay patches every memory of a bank once an epoch. Done in Python,
    each row is parsed, validated and written back: the pass over ~170k memories
    took minutes of the one writer thread in the soak. Only this field changes, and
    no cache holds it, so SQLite rewrites it in place.
    """
    if not factors:
        return 0
    try:
        checked = {i: _DECAY_FACTOR.validate_python(f) for i, f in factors.items()}
    except ValidationError as exc:
        rule = exc.errors(include_url=False)[0]["msg"]
        raise InvalidInputError([FieldProblem("decay_factor", rule)]) from None
    cursor = conn.executemany(
        "UPDATE documents SET body = json_set(body, '$.decay_factor', json(?)), seq = ?"
        " WHERE bank_id = ? AND event_id = ?",
        [(json.dumps(factor), seq, bank_id, event_id) for event_id, factor in checked.items()],
    )
    return int(cursor.rowcount)


def _counts_only(patch: DocumentPatch) -> bool:
    """A patch that only adds returns to ``retrieval_count`` (what every recall sends)."""
    added = patch.retrieval_count_increment
    return added > 0 and patch == DocumentPatch(retrieval_count_increment=added)


def _count_retrievals(
    conn: sqlite3.Connection, bank_id: str, added: dict[str, int], seq: int
) -> int:
    """Add to ``retrieval_count`` in the stored JSON, in SQL; how many of the bank's rows had one.

    Recall's feedback patches every memory it returned. Done in Python, each row's
    body and vector were parsed and validated twice on the writer thread (~0.1 ms a
    row, holding the GIL the recalls running meanwhile wait for). A positive
    increment keeps the count within its bound, and no cache holds the count.
    """
    if not added:
        return 0
    cursor = conn.executemany(
        "UPDATE documents SET body = json_set(body, '$.retrieval_count',"
        " COALESCE(json_extract(body, '$.retrieval_count'), 0) + ?), seq = ?"
        " WHERE bank_id = ? AND event_id = ?",
        [(count, seq, bank_id, event_id) for event_id, count in added.items()],
    )
    return int(cursor.rowcount)


@dataclass(frozen=True)
class _Patched:
    """A patched document, and its new vector-cache row when its tags changed."""

    doc: IndexDocument
    cache_row: CacheRow | None

    def apply(self, vectors: VectorCache) -> None:
        if self.cache_row is not None:
            vectors.put([self.cache_row])
        else:
            vectors.set_importance(self.doc.bank_id, self.doc.event_id, self.doc.importance_score)


def _patch_row(
    conn: sqlite3.Connection, bank_id: str, event_id: str, patch: DocumentPatch, seq: int
) -> _Patched | None:
    """Patch one row inside the caller's write transaction; ``None`` if the bank lacks it.

    A change of tags rewrites the row as ``upsert`` does (tag column, text index,
    cache); other signals rewrite only the importance column and the body.
    """
    found = conn.execute(
        "SELECT doc_id, body, embedding FROM documents WHERE event_id = ? AND bank_id = ?",
        (event_id, bank_id),
    ).fetchone()
    if found is None:
        return None
    doc_id, body, blob = found
    old = document(body, blob)
    doc = patch.applied_to(old)
    if doc == old:
        return _Patched(old, None)
    if doc.tags != old.tags:
        return _Patched(doc, _write(conn, doc, timestamp_us(doc.timestamp), blob, seq))
    conn.execute(
        "UPDATE documents SET importance_score = ?, body = ?, seq = ? WHERE doc_id = ?",
        (doc.importance_score, _stored_body(doc), seq, doc_id),
    )
    return _Patched(doc, None)
