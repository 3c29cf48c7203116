"""``SqliteMemoryIndex``: the MemoryIndex port over the embedded index's parts.

It checks arguments, sends reads to a reader connection and writes to the
writer (:mod:`.connections`), and keeps the writer's vector cache current: with
its own writes as they commit, and from ``seq`` when ``PRAGMA data_version``
shows that another connection or process committed (:func:`.rows.caught_up`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt
import structlog

from cogsub.core.documents import IndexDocument
from cogsub.core.errors import ConfigurationError, FieldProblem, InvalidInputError
from cogsub.core.listing import ListingKey
from cogsub.index.ports import (
    BankCounts,
    Candidates,
    DecayedPage,
    DecayStep,
    DocumentPatch,
    Hit,
    NeighbourWindow,
    SearchFilters,
    check_decay_page_size,
    newest_versions,
    procedure_of,
)
from cogsub.index.sqlite import listing, reads, rows, text
from cogsub.index.sqlite.connections import WAL_CHECKPOINT_PAGES, Connections
from cogsub.index.sqlite.recall import DecodedRows, RecallAsk, gather
from cogsub.index.sqlite.vectors import VectorCache, one_blas_thread, unit
from cogsub.index.text_query import query_terms

if TYPE_CHECKING:
    from cogsub.index.sqlite.tantivy_text import TantivyText

__all__ = ["TEXT_ENGINES", "SqliteMemoryIndex", "TextEngineName"]

TextEngineName = Literal["fts5", "tantivy"]
TEXT_ENGINES: tuple[TextEngineName, ...] = ("fts5", "tantivy")
#: Documents a bank holds before the tantivy arm indexes it. A smaller bank's searches are
#: FTS5's, fast enough there (recall p95 36.5 ms at 10,000 a bank, 48 at 100,000:
#: performance.md), and its writes commit nothing to tantivy (~10 ms of CPU a bank a write).
LARGE_BANK = 20_000
#: Seconds between two catch-ups of the tantivy arm with SQLite's writes. Each catch-up
#: commits every large bank written since (~12 ms each): caught up after every write, a
#: 100-document batch over 40 large banks took ~0.9 s, against ~17 ms with FTS5 alone.
#: Meanwhile the written banks' searches are FTS5's.
TEXT_CATCH_UP_S = 1.0

_T = TypeVar("_T")
_log = structlog.get_logger("cogsub.index.sqlite")


class SqliteMemoryIndex:
    """MemoryIndex over one SQLite file; ``":memory:"`` gives a private in-memory index.

    Args:
        path: The database file (its directory must exist) or ``":memory:"``.
        busy_timeout_s: How long a write waits for another process's write lock
            before raising ``UnavailableError``.
        checkpoint_pages: Pages the write-ahead log holds before a commit checkpoints
            it into the file (``WAL_CHECKPOINT_PAGES``).
        text_engine: What answers text searches: the file's FTS5 tables, or tantivy
            indexes beside the file (``<name>.text/``, :mod:`.tantivy_text`) for the banks
            of at least ``large_bank`` documents, derived from the rows and brought level
            with them as a write returns, at most once per ``text_catch_up_s`` (FTS5
            answers the smaller banks, and scores a bank's rows written until then).
        large_bank: With ``text_engine="tantivy"``, the documents a bank holds before
            tantivy indexes it (0: every bank).
        text_catch_up_s: With ``text_engine="tantivy"``, the seconds between two
            catch-ups of tantivy with the writes (0: after every write).

    Call ``close()`` when done; it finishes pending work, closes the database
    and stops the worker thread.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_s: float = 5.0,
        checkpoint_pages: int = WAL_CHECKPOINT_PAGES,
        text_engine: TextEngineName = "tantivy",
        large_bank: int = LARGE_BANK,
        text_catch_up_s: float = TEXT_CATCH_UP_S,
    ) -> None:
        if checkpoint_pages < 1:
            raise ConfigurationError(
                f"checkpoint_pages must be at least 1 page, not {checkpoint_pages}"
            )
        if text_engine not in TEXT_ENGINES:
            raise ConfigurationError(
                f"text_engine must be one of {', '.join(TEXT_ENGINES)}, not {text_engine!r}"
            )
        if large_bank < 0:
            raise ConfigurationError(f"large_bank must not be negative, not {large_bank}")
        if not text_catch_up_s >= 0:
            raise ConfigurationError(f"text_catch_up_s must not be negative, not {text_catch_up_s}")
        where = os.fspath(path)
        self._text = (
            _tantivy_beside(where, large_bank, text_catch_up_s)
            if text_engine == "tantivy"
            else None
        )
        self._db = Connections(
            where,
            busy_timeout_s=busy_timeout_s,
            checkpoint_pages=checkpoint_pages,
            text_engine=self._text,
        )
        # Changed by the writer as it commits and searched by recall on the readers, each
        # under the lock: an apply or a search takes a few ms; a catch-up reads the rows
        # another connection committed (the first one, every vector: as long as the writer
        # took before, when only its thread built the cache).
        self._vectors: VectorCache | None = None
        self._vectors_lock = threading.Lock()
        self._data_version = -1
        self._decoded = DecodedRows()  # recall's documents by row version
        one_blas_thread()

    @property
    def cached_vector_bytes(self) -> int:
        """Bytes the in-memory vector matrix and its filter arrays hold (0 before any search).

        Grows with the documents the index holds, by half its size at a time; read
        from any thread, it is a snapshot for reports.
        """
        vectors = self._vectors
        return 0 if vectors is None else vectors.nbytes

    @property
    def resident_data_bytes(self) -> int:
        """What the index keeps in memory per document: the vector cache and its id map.

        Memory that grows with the data rather than with a backlog: a report subtracts
        it from the process's resident size to see whether anything else grows.
        """
        vectors = self._vectors
        return 0 if vectors is None else vectors.nbytes + vectors.id_map_bytes

    async def ensure(self, *, dimension: int) -> None:
        """Record the vector dimension; ``ConfigurationError`` if another one is recorded."""
        if dimension < 1:
            raise ConfigurationError(f"vector dimension must be positive, not {dimension}")
        await self._db.write(rows.ensure_dimension, dimension)

    async def upsert(self, documents: Sequence[IndexDocument]) -> None:
        """Insert or replace documents by ``event_id``, all in one transaction.

        Raises:
            ConfigurationError: an embedding whose length is not the index's dimension.
            InvalidInputError: a timestamp that is not ISO-8601, or a non-finite embedding.
        """
        if documents:
            await self._write(rows.upsert, list(documents))

    async def get(self, bank_id: str, event_id: str) -> IndexDocument | None:
        """The document ``event_id`` of ``bank_id``, or ``None``."""
        return await self._db.read(reads.get, bank_id, event_id)

    async def present(self, bank_id: str, event_ids: Sequence[str]) -> set[str]:
        """Which of ``event_ids`` are documents of ``bank_id``: one query, no bodies read."""
        if not event_ids:
            return set()
        return await self._db.read(reads.present, bank_id, list(dict.fromkeys(event_ids)))

    async def search_text(self, query: str, filters: SearchFilters, *, size: int) -> list[Hit]:
        """BM25 hits (higher is better) over summary and tags; no query terms means no hits."""
        _check_size(size)
        terms = query_terms(query)
        if not terms or size == 0 or _matches_nothing(filters):
            return []
        return await self._db.read(text.search_text, terms, filters, size)

    async def search_vector(
        self, vector: Sequence[float], filters: SearchFilters, *, size: int
    ) -> list[Hit]:
        """Exact nearest neighbours by cosine similarity (the score, in [-1, 1]).

        Raises:
            InvalidInputError: a vector of the wrong length, or non-finite values.
        """
        _check_size(size)
        query = np.asarray(vector, dtype=np.float32)
        if query.ndim != 1 or not np.isfinite(query).all():
            raise InvalidInputError([FieldProblem("vector", "must be a list of finite numbers")])
        if size == 0 or _matches_nothing(filters):
            return []
        return await self._db.write(self._search_vector, unit(query), filters, size)

    async def recall_candidates(
        self,
        query_text: str,
        query_vector: Sequence[float],
        filters: SearchFilters,
        *,
        text_pool: int,
        vector_pool: int,
        neighbours: NeighbourWindow | None = None,
        procedure_versions: bool = False,
    ) -> Candidates:
        """Recall's reads in one job on a reader thread (never behind the writer's queue).

        Raises:
            InvalidInputError: a vector of the wrong length, or non-finite values.
        """
        _check_size(text_pool)
        _check_size(vector_pool)
        query = np.asarray(query_vector, dtype=np.float32)
        if query.ndim != 1 or not np.isfinite(query).all():
            raise InvalidInputError([FieldProblem("vector", "must be a list of finite numbers")])
        if _matches_nothing(filters):
            return Candidates.empty(query.shape[0])
        terms = query_terms(query_text)
        ask = RecallAsk(terms, unit(query), filters, text_pool, vector_pool, neighbours)
        return await self._db.read(self._recall, ask, procedure_versions)

    async def update(self, bank_id: str, event_id: str, patch: DocumentPatch) -> IndexDocument:
        """Apply ``patch`` atomically and return the new document.

        Raises:
            NotFoundError: no document ``event_id`` in ``bank_id``.
            InvalidInputError: the patch would put a field out of its range.
        """
        return await self._write(rows.update, bank_id, event_id, patch)

    async def update_many(self, bank_id: str, patches: Mapping[str, DocumentPatch]) -> int:
        """Apply each patch in one transaction (one sync); how many documents were found.

        Raises:
            InvalidInputError: a patch would put a field out of its range (nothing applied).
        """
        return await self.update_across({bank_id: patches})

    async def update_across(self, patches: Mapping[str, Mapping[str, DocumentPatch]]) -> int:
        """``update_many`` for several banks (bank → id → patch) in one transaction.

        An extraction batch patches facts of every bank it touched; one sync for
        all of them instead of one per bank (see ``cogsub.bulk.update_all``).
        """
        by_bank = {bank: dict(bank_patches) for bank, bank_patches in patches.items()}
        if not any(by_bank.values()):
            return 0
        return await self._write(rows.update_across, by_bank)

    async def decay_page(
        self, bank_id: str, step: DecayStep, *, size: int, after: str | None = None
    ) -> DecayedPage:
        """Decay the next ``size`` documents of the bank after ``after``, in one transaction."""
        check_decay_page_size(size)
        return await self._db.write(rows.decay_page, bank_id, step, size, after)

    async def delete(self, bank_id: str, event_id: str) -> bool:
        """Remove a document; ``True`` if it existed in ``bank_id``."""
        return await self.delete_many(bank_id, [event_id]) == 1

    async def delete_many(self, bank_id: str, event_ids: Sequence[str]) -> int:
        """Remove the documents ``event_ids`` of ``bank_id`` in one transaction; how many.

        Ids of another bank, unknown ids and repeats count 0. The rows, their FTS
        entries and their vectors go together, and the write-ahead log is emptied,
        so the text is readable in none of the files.
        """
        wanted = list(dict.fromkeys(event_ids))
        if not wanted:
            return 0
        return await self._write(rows.delete_many, bank_id, wanted)

    async def count(self, bank_id: str | None = None) -> int:
        """Documents in ``bank_id``, or in all banks."""
        return await self._db.read(reads.count, bank_id)

    async def neighbours(
        self,
        filters: SearchFilters,
        anchors: Sequence[IndexDocument],
        *,
        each_side: int,
        within_s: float | None = None,
        exclude: Collection[str] = (),
    ) -> list[IndexDocument]:
        """Up to ``each_side`` documents before and after each anchor in its session."""
        _check_size(each_side)
        placed = [a for a in anchors if a.session_id is not None and a.bank_id == filters.bank_id]
        if each_side == 0 or not placed or _matches_nothing(filters):
            return []
        window_us = None if within_s is None else int(within_s * 1_000_000)
        skip = {*exclude, *(a.event_id for a in placed)}
        return await self._db.read(reads.neighbours, filters, placed, each_side, window_us, skip)

    async def scan(
        self, filters: SearchFilters, *, size: int, after: str | None = None
    ) -> list[IndexDocument]:
        """Documents matching ``filters`` in ``event_id`` order, after the cursor."""
        return await self._listed(reads.scan, filters, size, after)

    async def scan_in_replay_order(
        self, filters: SearchFilters, *, size: int, after: IndexDocument | None = None
    ) -> list[IndexDocument]:
        """Documents matching ``filters`` in replay order, after the cursor's place."""
        return await self._listed(reads.scan_in_replay_order, filters, size, after)

    async def list_newest(
        self,
        filters: SearchFilters,
        *,
        size: int,
        after: ListingKey | None = None,
        include_superseded: bool = False,
    ) -> list[IndexDocument]:
        """Documents matching ``filters`` newest first, after the cursor (:mod:`.listing`)."""
        return await self._listed(listing.newest_page, filters, size, after, include_superseded)

    async def bank_counts(
        self, bank_ids: Collection[str] | None = None, *, size: int, after: str | None = None
    ) -> list[BankCounts]:
        """Banks holding documents, in id order after ``after``, summarised."""
        _check_size(size)
        return await self._db.read(listing.bank_counts, bank_ids, size, after)

    async def close(self) -> None:
        """Close the database and stop the worker thread (idempotent)."""
        await self._db.close()
        self._vectors = None
        if self._text is not None:
            self._text.close()

    async def _listed(
        self,
        read: Callable[..., list[IndexDocument]],
        filters: SearchFilters,
        size: int,
        after: str | IndexDocument | ListingKey | None,
        *more: Any,
    ) -> list[IndexDocument]:
        """A scan's read on a reader connection, or nothing for a size 0 or an empty filter set."""
        _check_size(size)
        if size == 0 or _matches_nothing(filters):
            return []
        return await self._db.read(read, filters, size, after, *more)

    async def _write(self, write: Callable[..., rows.Written[_T]], *args: Any) -> _T:
        """Run ``write`` on the writer, then bring the vector cache along on that thread."""
        return await self._db.write(self._written, write, *args)

    def _written(
        self, conn: sqlite3.Connection, write: Callable[..., rows.Written[_T]], *args: Any
    ) -> _T:
        done = write(conn, *args)
        if done.seq is not None:
            self._text_caught_up(conn, done.seq, changed=done.text_changed, erased=done.erased)
            self._after_write(done.seq, done.apply)
        if done.erased:
            self._decoded.clear()  # no forgotten text stays in memory either
            self._db.truncate_wal(conn)
        return done.answer

    def _text_caught_up(
        self, conn: sqlite3.Connection, seq: int, *, changed: bool, erased: bool
    ) -> None:
        """The text engine given what SQLite just committed (now, or owed: ``written``).

        A failure leaves the rows committed and the engine behind: the next write, or
        the next open, applies them (what it applies is keyed by ``seq``). A write of
        signals only (``changed`` false) commits nothing to the engine. A forget
        (``erased``) catches up before it returns: its text leaves the engine's files.
        """
        if self._text is None:
            return
        try:
            self._text.written(conn, seq, changed=changed, at_once=erased)
        except Exception:
            _log.exception("index_text_behind")

    def _after_write(self, seq: int, apply: Callable[[VectorCache], object]) -> None:
        with self._vectors_lock:
            self._apply(seq, apply)

    def _apply(self, seq: int, apply: Callable[[VectorCache], object]) -> None:
        vectors = self._vectors
        if vectors is None:
            return
        try:
            apply(vectors)
        except Exception:
            # The write is committed; a half-updated cache must not answer searches.
            self._vectors = None
            _log.exception("index_vector_cache_dropped")
            return
        # If another connection committed in between, the catch-up re-reads from
        # vectors.seq, which re-applies our rows too (harmless).
        if vectors.seq == seq - 1:
            vectors.seq = seq

    def _search_vector(
        self,
        conn: sqlite3.Connection,
        query: npt.NDArray[np.float32],
        filters: SearchFilters,
        size: int,
    ) -> list[Hit]:
        with self._vectors_lock:
            vectors = self._current_vectors(conn)
            if vectors is None:
                return []
            _check_dimension(query, vectors)
            found = vectors.search(query, filters, size)
        return reads.hits(conn, found, bank_id=filters.bank_id)

    def _recall(self, conn: sqlite3.Connection, ask: RecallAsk, versions: bool) -> Candidates:
        """The one job of ``recall_candidates``, on whichever connection runs it."""
        with self._vectors_lock:
            vectors = self._vectors_seen_by(conn)
            if vectors is not None:
                _check_dimension(ask.query, vectors)
            ranked = (
                [] if vectors is None else vectors.search(ask.query, ask.filters, ask.vector_pool)
            )
        found = gather(conn, ask, ranked, self._decoded)
        newest: dict[str, int] = {}
        if versions and vectors is not None:
            docs = [h.document for h in (*found.text, *found.vector)] + found.neighbours
            wanted = {p[0] for doc in docs if (p := procedure_of(doc.tags))}
            tags = {f"procedure:{pid}" for pid in wanted}
            with self._vectors_lock:
                sets = vectors.tag_sets_holding(ask.filters.bank_id, tags)
            newest = newest_versions(sets, wanted)
        return Candidates(found.text, found.vector, found.neighbours, newest, found.embeddings)

    def _vectors_seen_by(self, conn: sqlite3.Connection) -> VectorCache | None:
        """The vector cache, caught up to what ``conn`` sees (caller holds the lock).

        Any connection may catch it up: rows at or below its ``seq`` are in it already,
        and the writer applying its own commit again afterwards changes nothing.
        """
        (seq,) = conn.execute("SELECT seq FROM index_state").fetchone()
        if self._vectors is None or seq > self._vectors.seq:
            self._vectors = rows.caught_up(conn, self._vectors)
        return self._vectors

    def _current_vectors(self, conn: sqlite3.Connection) -> VectorCache | None:
        """The vector cache, built on first use and caught up after other connections' writes."""
        (data_version,) = conn.execute("PRAGMA data_version").fetchone()
        if self._vectors is not None and data_version == self._data_version:
            return self._vectors
        self._data_version = data_version
        self._vectors = rows.caught_up(conn, self._vectors)
        return self._vectors


def _tantivy_beside(path: str, large_bank: int, catch_up_s: float) -> TantivyText:
    """The tantivy arm for ``path``; imported only when chosen (an install may lack tantivy)."""
    try:
        from cogsub.index.sqlite.tantivy_text import TantivyText, text_root
    except ImportError as missing:
        raise ConfigurationError(
            "text_engine 'tantivy' needs the tantivy package (pip install tantivy==0.27.0),"
            " or choose text_engine 'fts5'"
        ) from missing
    return TantivyText(text_root(path), large_bank=large_bank, catch_up_s=catch_up_s)


def _check_size(size: int) -> None:
    if size < 0:
        raise InvalidInputError([FieldProblem("size", "must not be negative")])


def _check_dimension(query: npt.NDArray[np.float32], vectors: VectorCache) -> None:
    if query.shape[0] != vectors.dimension:
        rule = f"must have {vectors.dimension} values, not {query.shape[0]}"
        raise InvalidInputError([FieldProblem("vector", rule)])


def _matches_nothing(filters: SearchFilters) -> bool:
    return filters.fact_types == frozenset() or filters.tags_any == frozenset()
