"""The embedded MemoryIndex: one SQLite file for documents and BM25, numpy for vectors.

Storage (one file, or ``":memory:"`` for the in-process fake):

- ``documents``: one row per (``bank_id``, ``event_id``) (unique) with the IndexDocument JSON
  (minus the embedding), the filter columns (``bank_id``, ``fact_type``,
  ``ts_us`` = event time in epoch microseconds, ``importance_score``, ``tags``
  as a JSON array), the embedding as a little-endian float32 BLOB, and ``seq``,
  the write transaction that last touched the row. An explicit integer
  ``doc_id`` is the rowid because ``VACUUM`` may renumber implicit rowids, and
  the FTS table refers to rows by rowid.
- ``text_N``: FTS5 over ``summary`` and ``tags`` (porter stemming, unicode61,
  diacritics removed), written in the same transaction as the row; a table per
  bank (``text_tables`` says which), shared in turn past ``_TEXT_TABLES`` banks.
- ``tombstones``: ``bank_id``, ``event_id`` and ``seq`` of deleted rows, so that other
  connections can catch up incrementally.

Text search ORs the quoted query terms (:mod:`cogsub.index.text_query`) and
ranks by FTS5's ``bm25()`` over the bank's table, negated so that higher is
better; a search reads no other bank's postings. Because bm25()
costs about a microsecond per matching row, a query whose terms match many rows
is answered in stages, rarest term first, stopping as soon as a score bound
proves the rows not reached yet cannot enter the top k (``fts5_stages``); the
answer is the full OR's, usually for a fraction of the work.

Vectors live in memory as a (dimension x capacity) float32 matrix of unit
columns (one column per document: the column-major matrix-vector product
measured ~2x faster here than row-major) with parallel arrays for the filters.
Search is exact: score every column, mask by the filters, take the top k. The
matrix is built lazily on the first vector search, kept current by this
instance's own writes, and caught up from ``seq`` when ``PRAGMA data_version``
shows that another connection or process committed.

Deleting erases: ``secure_delete`` zeroes what a delete frees, every
``delete_many`` merges the bank's FTS table so the deleted rows' terms leave it too
(an FTS5 delete otherwise only appends a marker), and then truncates the WAL,
so a forgotten memory's text is readable in none of the files.

Semantics beyond the port: ``since`` is inclusive and ``until`` exclusive (both
on the event timestamp; naive datetimes are UTC); ``tags_any`` matches tags
exactly; an empty ``fact_types``/``tags_any`` set matches nothing; embeddings
come back rounded to float32; the same ``event_id`` in two banks is two
documents (schema 3; an index of schema 2, where ``event_id`` alone was unique,
is rebuilt in place when opened). Writes, vector searches and the
vector matrix live on one worker thread per instance, which also serialises this
instance's writes; lookups, text searches, neighbours, scans and counts run on two
reader threads, each with a read-only connection of its own (a file in WAL mode,
where readers and the writer never wait for each other; ``":memory:"`` keeps one).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypeVar

import numpy as np
import numpy.typing as npt
import structlog
from pydantic import TypeAdapter, ValidationError
from threadpoolctl import threadpool_limits

from cogsub.core.documents import IndexDocument
from cogsub.core.errors import (
    ConfigurationError,
    ConflictError,
    FieldProblem,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)
from cogsub.core.events import FactType
from cogsub.index.ports import (
    DecayedPage,
    DecayStep,
    DocumentPatch,
    Hit,
    SearchFilters,
    check_decay_page_size,
    replay_order,
)
from cogsub.index.text_query import (
    fts5_match,
    fts5_stages,
    fts5_staging_pays,
    fts5_weighty_terms,
    query_terms,
    quote_fts5,
)

__all__ = ["WAL_CHECKPOINT_PAGES", "SqliteMemoryIndex"]

_T = TypeVar("_T")
_log = structlog.get_logger(__name__)

SCHEMA_VERSION = 3
#: BM25 column weights (summary, tags): tags are short, so full weight would let them dominate.
_BM25_WEIGHTS = "1.0, 0.5"
_TEXT_COLUMNS = "summary, tags, tokenize = 'porter unicode61 remove_diacritics 2'"
#: FTS5 tables for text: one per bank up to this many banks, which later banks then share
#: (each table is six in the schema, which every connection parses when it opens).
_TEXT_TABLES = 64
#: Matching rows (bm25() costs ~1 us each) above which a query is answered in stages.
_STAGE_BUDGET = 5_000
_LOAD_CHUNK = 4096
#: Slots a vector search scores at a time: its scratch and selections stay this size
#: (under the allocator's mmap threshold) whatever the index holds.
_SEARCH_BLOCK = 1 << 16
#: Reader threads (each with its own connection) beside the one writer thread.
_READERS = 2
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
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FACT_CODES = {fact: code for code, fact in enumerate(FactType, start=1)}
_SQLITE_CANTOPEN = 14
#: Seconds between tries at a truncate a forget could not finish (a reader held the log).
#: Each try that cannot truncate still checkpoints what it can, like a passive checkpoint.
_TRUNCATE_RETRY_S = 1.0

_DOCUMENT_COLUMNS = """
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
    embedding BLOB NOT NULL
"""

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS index_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL,
    dimension INTEGER
);
INSERT OR IGNORE INTO index_state (id, seq, dimension) VALUES (1, 0, NULL);
CREATE TABLE IF NOT EXISTS documents ({_DOCUMENT_COLUMNS});
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
PRAGMA user_version = {SCHEMA_VERSION};
"""

# Replay order, as the replay index keeps it, and the rows strictly after a cursor in it.
_DECAY = "json_extract(d.body, '$.decay_factor')"
_IN_REPLAY_ORDER = f"{_DECAY} DESC, d.importance_score DESC, d.event_id"
_AFTER_IN_REPLAY = (
    f"({_DECAY} < ? OR {_DECAY} = ?"
    " AND (d.importance_score < ? OR d.importance_score = ? AND d.event_id > ?))"
)
# Strictly before / after an anchor's (ts_us, event_id), in the session index's order.
_BEFORE = "(d.ts_us, d.event_id) < (?, ?)"
_AFTER = "(d.ts_us, d.event_id) > (?, ?)"
_ABOVE = "d.ts_us >= ?"
# No window: far enough to reach any timestamp, near enough to stay inside SQLite's 64 bits.
_MAX_REACH_US = 2**62
_BELOW = "d.ts_us <= ?"
_ROW_COLUMNS = "doc_id, event_id, bank_id, fact_type, ts_us, importance_score, tags, embedding"
#: The document's own rule for decay_factor, for patches written in SQL.
_DECAY_FACTOR: TypeAdapter[float] = TypeAdapter(
    Annotated[float, *IndexDocument.model_fields["decay_factor"].metadata]
)
# Listed ids of one bank, found through the (bank_id, event_id) identity index.
_BY_IDS_IN_BANK = "bank_id = ? AND event_id IN (SELECT value FROM json_each(?))"


def _nothing(conn: sqlite3.Connection) -> None:
    """A call that only makes the worker open its connection."""


@functools.cache
def _one_blas_thread() -> None:
    """Keep numpy's BLAS on the calling thread, for the whole process.

    The matrix-vector product is memory-bound: a second BLAS thread did not
    shorten it here (11.1 ms against 8.7 ms at 384 x 100k), while OpenBLAS's extra
    thread spins between calls and under a steady stream of searches burned most
    of a core (1.3 s of CPU against 0.07 s for 200 products of 8 x 150k). Once per
    process: the limit is process-wide.
    """
    threadpool_limits(limits=1, user_api="blas")


@contextmanager
def _sqlite_errors() -> Iterator[None]:
    """Map sqlite3 exceptions to ours, by exception type (and SQLite's result code)."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        raise ConflictError(f"index constraint violated: {exc}") from exc
    except sqlite3.OperationalError as exc:
        if getattr(exc, "sqlite_errorcode", None) == _SQLITE_CANTOPEN:
            raise ConfigurationError(f"cannot open the index database: {exc}") from exc
        raise UnavailableError(f"index database unavailable: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        raise ConfigurationError(f"not a usable index database: {exc}") from exc


@contextmanager
def _transaction(conn: sqlite3.Connection, *, write: bool) -> Iterator[None]:
    # IMMEDIATE takes the write lock up front, so read-modify-write is atomic across processes.
    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _epoch_us(value: datetime) -> int:
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return (aware - _EPOCH) // timedelta(microseconds=1)


def _timestamp_us(text: str) -> int:
    try:
        return _epoch_us(datetime.fromisoformat(text))
    except ValueError:
        rule = "must be an ISO-8601 timestamp, e.g. 2026-05-08T22:31:25.237Z"
        raise InvalidInputError([FieldProblem("timestamp", rule)]) from None


def _unit(vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0.0 else vector


def _document(body: str, blob: bytes) -> IndexDocument:
    data = json.loads(body)
    data["embedding"] = np.frombuffer(blob, dtype=np.float32).tolist()
    return IndexDocument.model_validate(data)


class _TagSets:
    """Distinct tag sets by number (0: no tags), each counted by the slots that hold it.

    A set no slot holds any more gives its number back, so the sets stay as many as
    the documents have, however they were re-tagged or forgotten. Which sets hold a
    tag is kept per tag and updated as sets come and go, not rebuilt.
    """

    _MAX_CACHED_TAGS = 1024  # filters name any string; only so many answers are kept

    def __init__(self) -> None:
        self._sets: list[tuple[str, ...]] = [()]
        self._users = [0]
        self._numbers: dict[tuple[str, ...], int] = {(): 0}
        self._free: list[int] = []
        self._capacity = 64
        self._holding: dict[str, npt.NDArray[np.bool_]] = {}

    def __len__(self) -> int:
        return len(self._numbers)

    def take(self, tags: tuple[str, ...]) -> int:
        """The number of ``tags``, counted once more."""
        number = self._numbers.get(tags)
        if number is None:
            number = self._add(tags)
        self._users[number] += 1
        return number

    def release(self, number: int) -> None:
        """One slot fewer holds set ``number``; the last one gives the number back."""
        if number == 0:
            return
        self._users[number] -= 1
        if self._users[number] == 0:
            del self._numbers[self._sets[number]]
            self._sets[number] = ()
            self._free.append(number)
            for holding in self._holding.values():
                holding[number] = False

    def holding_any(self, tags: Collection[str]) -> npt.NDArray[np.bool_]:
        """By set number: whether the set holds any of ``tags``."""
        wanted = np.zeros(self._capacity, dtype=np.bool_)
        for tag in tags:
            wanted |= self._holding_tag(tag)
        return wanted

    def _add(self, tags: tuple[str, ...]) -> int:
        if self._free:
            number = self._free.pop()
            self._sets[number] = tags
        else:
            number = len(self._sets)
            self._sets.append(tags)
            self._users.append(0)
            if number == self._capacity:
                self._grow()
        self._numbers[tags] = number
        for tag, holding in self._holding.items():
            holding[number] = tag in tags
        return number

    def _grow(self) -> None:
        self._capacity *= 2
        for tag, holding in self._holding.items():
            grown = np.zeros(self._capacity, dtype=np.bool_)
            grown[: holding.size] = holding
            self._holding[tag] = grown

    def _holding_tag(self, tag: str) -> npt.NDArray[np.bool_]:
        holding = self._holding.get(tag)
        if holding is None:
            holding = np.zeros(self._capacity, dtype=np.bool_)
            sets = self._sets
            holding[: len(sets)] = np.fromiter((tag in t for t in sets), np.bool_, len(sets))
            if len(self._holding) >= self._MAX_CACHED_TAGS:
                self._holding.clear()
            self._holding[tag] = holding
        return holding


def _block_bytes(size: int) -> int:
    """What an object of ``size`` bytes takes: pymalloc serves 512 bytes or fewer
    in blocks of 16-byte steps (a 32-character id's 81 bytes take 96)."""
    return size if size > 512 else -(-size // 16) * 16


def _entry_bytes(key: str, slot: int) -> int:
    return _block_bytes(sys.getsizeof(key)) + _block_bytes(sys.getsizeof(slot))


def _slot_key(bank_id: str, event_id: str) -> str:
    """One string per document identity (ids never hold a control character)."""
    return f"{bank_id}\x1f{event_id}"


class _Vectors:
    """Unit document vectors as matrix columns (slots), with parallel filter arrays.

    Rows come in as tuples of ``_ROW_COLUMNS``, from SQLite or from our own writes.
    """

    def __init__(self, dimension: int, seq: int) -> None:
        self.seq = seq
        self.dimension = dimension
        self.used = 0
        self.columns = np.zeros((dimension, 0), dtype=np.float32)
        self.banks = np.zeros(0, dtype=np.int32)
        self.facts = np.zeros(0, dtype=np.int8)
        self.times = np.zeros(0, dtype=np.int64)
        self.importance = np.zeros(0, dtype=np.float64)
        self.doc_ids = np.zeros(0, dtype=np.int64)
        # A slot's tags as the number of its tag set: documents share a few sets (a
        # set of slots per tag and a tuple per slot took ~250 bytes a document).
        self.tag_sets = np.zeros(0, dtype=np.int32)
        # A search block's filter mask, one filter's test and scores, written in place
        # (as long as the slots up to a block: a small index keeps small ones).
        self._mask_scratch = np.zeros(0, dtype=np.bool_)
        self._test_scratch = np.zeros(0, dtype=np.bool_)
        self._score_scratch = np.zeros(0, dtype=np.float32)
        self._tags = _TagSets()
        self.slot_of: dict[str, int] = {}
        # What the map's ids and slot numbers hold besides the dict's own table, kept as
        # they come and go: summing them at every report would walk a million strings.
        self._id_bytes = 0
        self.bank_codes: dict[str, int] = {}
        self.free: list[int] = []

    @property
    def id_map_bytes(self) -> int:
        """The id → slot map: its table, its id strings and its slot numbers."""
        return sys.getsizeof(self.slot_of) + self._id_bytes

    @property
    def nbytes(self) -> int:
        arrays = (
            self.columns,
            self.banks,
            self.facts,
            self.times,
            self.importance,
            self.doc_ids,
            self.tag_sets,
            self._mask_scratch,
            self._test_scratch,
            self._score_scratch,
        )
        return sum(array.nbytes for array in arrays)

    def reserve(self, needed: int) -> None:
        capacity = self.columns.shape[1]
        if needed <= capacity:
            return
        # Grow by half: copying 150 MB for every few inserts would stall writers.
        extra = max(needed, capacity + capacity // 2, 1024) - capacity
        self.columns = np.concatenate(
            [self.columns, np.zeros((self.dimension, extra), dtype=np.float32)], axis=1
        )
        self.banks = np.concatenate([self.banks, np.full(extra, -1, dtype=np.int32)])
        self.facts = np.concatenate([self.facts, np.zeros(extra, dtype=np.int8)])
        self.times = np.concatenate([self.times, np.zeros(extra, dtype=np.int64)])
        self.importance = np.concatenate([self.importance, np.zeros(extra, dtype=np.float64)])
        self.doc_ids = np.concatenate([self.doc_ids, np.zeros(extra, dtype=np.int64)])
        self.tag_sets = np.concatenate([self.tag_sets, np.zeros(extra, dtype=np.int32)])
        width = min(capacity + extra, _SEARCH_BLOCK)
        if self._mask_scratch.size < width:
            self._mask_scratch = np.empty(width, dtype=np.bool_)
            self._test_scratch = np.empty(width, dtype=np.bool_)
            self._score_scratch = np.empty(width, dtype=np.float32)

    def put(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert or replace rows of ``_ROW_COLUMNS``; the last row of an event wins."""
        latest = list({(row[2], row[1]): row for row in rows}.values())
        if not latest:
            return
        slots = np.empty(len(latest), dtype=np.int64)
        for index, (doc_id, event_id, bank_id, fact, ts_us, importance, tags, _) in enumerate(
            latest
        ):
            key = _slot_key(bank_id, event_id)
            slot = self.slot_of.get(key)
            if slot is None:
                if self.free:
                    slot = self.free.pop()
                else:
                    self.reserve(self.used + 1)
                    slot, self.used = self.used, self.used + 1
                self.slot_of[key] = slot
                self._id_bytes += _entry_bytes(key, slot)
            slots[index] = slot
            self.doc_ids[slot] = doc_id
            self.banks[slot] = self.bank_codes.setdefault(bank_id, len(self.bank_codes))
            self.facts[slot] = 0 if fact is None else _FACT_CODES[FactType(fact)]
            self.times[slot] = ts_us
            self.importance[slot] = importance
            number = self._tags.take(tuple(json.loads(tags)))
            self._tags.release(int(self.tag_sets[slot]))  # a replaced row's set, if any
            self.tag_sets[slot] = number
        matrix = np.frombuffer(b"".join(row[-1] for row in latest), dtype=np.float32)
        matrix = matrix.reshape(len(latest), self.dimension)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        self.columns[:, slots] = (matrix / np.where(norms > 0, norms, 1.0)).T

    def remove(self, bank_id: str, event_id: str) -> None:
        key = _slot_key(bank_id, event_id)
        slot = self.slot_of.pop(key, None)
        if slot is None:
            return
        self._id_bytes -= _entry_bytes(key, slot)
        self._tags.release(int(self.tag_sets[slot]))
        self.tag_sets[slot] = 0
        self.banks[slot] = -1
        self.columns[:, slot] = 0.0
        self.free.append(slot)

    def remove_all(self, bank_id: str, event_ids: Sequence[str]) -> None:
        for event_id in event_ids:
            self.remove(bank_id, event_id)

    def set_importance(self, bank_id: str, event_id: str, value: float) -> None:
        slot = self.slot_of.get(_slot_key(bank_id, event_id))
        if slot is not None:
            self.importance[slot] = value

    def search(
        self, query: npt.NDArray[np.float32], filters: SearchFilters, size: int
    ) -> list[tuple[int, float]]:
        """``(doc_id, cosine)`` of the best ``size`` documents passing ``filters``.

        Best first; equal scores in slot order.
        """
        code = self.bank_codes.get(filters.bank_id)
        if code is None or size < 1:
            return []
        wanted = _SlotFilter.of(filters, self._tags)
        best_slots = np.zeros(0, dtype=np.int64)
        best_scores = np.zeros(0, dtype=np.float32)
        # A block of slots at a time, keeping the best so far: what a search allocates
        # stays the same however many documents the index holds (whole-index masks,
        # candidate lists and selections were ~20 bytes a document, every search).
        for start in range(0, self.used, _SEARCH_BLOCK):
            stop = min(start + _SEARCH_BLOCK, self.used)
            # Once ``size`` are kept, a later slot must beat the worst of them: a tie
            # goes to the earlier slot, which every kept one is.
            floor = float(best_scores[-1]) if best_scores.size == size else None
            found = self._best_in_block(query, code, wanted, (start, stop), size, floor)
            if found is not None:
                best_slots = np.concatenate([best_slots, found[0]])
                best_scores = np.concatenate([best_scores, found[1]])
                order = np.lexsort((best_slots, -best_scores))[:size]
                best_slots, best_scores = best_slots[order], best_scores[order]
        return [
            (int(self.doc_ids[slot]), float(score))
            for slot, score in zip(best_slots, best_scores, strict=True)
        ]

    def _best_in_block(
        self,
        query: npt.NDArray[np.float32],
        code: int,
        wanted: _SlotFilter,
        block: tuple[int, int],
        size: int,
        floor: float | None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None:
        """The block's slots that pass and score above ``floor``: its best ``size`` of them."""
        start, stop = block
        width = stop - start
        test = self._test_scratch[:width]
        mask = np.equal(self.banks[start:stop], code, out=self._mask_scratch[:width])
        wanted.narrow(mask, self, block, test)
        # Scoring every column of the block and then selecting beats gathering the
        # candidate columns (a strided gather costs more than the product it saves).
        scored = np.matmul(query, self.columns[:, start:stop], out=self._score_scratch[:width])
        if floor is not None:
            mask &= np.greater(scored, floor, out=test)
        candidates = np.flatnonzero(mask)
        if candidates.size == 0:
            return None
        scores = scored[candidates]
        if candidates.size > size:
            # Select among candidates only (a partition crawls over many equal -inf):
            # all above the cut, then the earliest slots scoring just the cut.
            cut = np.partition(scores, candidates.size - size)[candidates.size - size]
            above = np.flatnonzero(scores > cut)
            at = np.flatnonzero(scores == cut)[: size - above.size]
            keep = np.concatenate([above, at])
            candidates, scores = candidates[keep], scores[keep]
        return candidates + start, scores


@dataclass(frozen=True)
class _SlotFilter:
    """A search's filters beyond the bank, as tests on the slots' parallel arrays."""

    facts: npt.NDArray[np.bool_] | None  # by fact code: allowed
    since_us: int | None
    until_us: int | None
    min_importance: float | None
    tag_sets: npt.NDArray[np.bool_] | None  # by tag set number: holds a wanted tag

    @classmethod
    def of(cls, filters: SearchFilters, tags: _TagSets) -> _SlotFilter:
        facts = None
        if filters.fact_types is not None:
            facts = np.zeros(len(_FACT_CODES) + 1, dtype=np.bool_)
            facts[[_FACT_CODES[FactType(fact)] for fact in filters.fact_types]] = True
        return cls(
            facts=facts,
            since_us=None if filters.since is None else _epoch_us(filters.since),
            until_us=None if filters.until is None else _epoch_us(filters.until),
            min_importance=filters.min_importance,
            tag_sets=None if filters.tags_any is None else tags.holding_any(filters.tags_any),
        )

    def narrow(
        self,
        mask: npt.NDArray[np.bool_],
        vectors: _Vectors,
        block: tuple[int, int],
        test: npt.NDArray[np.bool_],
    ) -> None:
        """Clear in ``mask`` the slots of ``block`` (start, stop) that fail; ``test`` is scratch."""
        start, stop = block
        if self.facts is not None:
            mask &= np.take(self.facts, vectors.facts[start:stop], out=test, mode="clip")
        if self.since_us is not None:
            mask &= np.greater_equal(vectors.times[start:stop], self.since_us, out=test)
        if self.until_us is not None:
            mask &= np.less(vectors.times[start:stop], self.until_us, out=test)
        if self.min_importance is not None:
            importance = vectors.importance[start:stop]
            mask &= np.greater_equal(importance, self.min_importance, out=test)
        if self.tag_sets is not None:
            mask &= np.take(self.tag_sets, vectors.tag_sets[start:stop], out=test, mode="clip")


class SqliteMemoryIndex:
    """MemoryIndex over one SQLite file; ``":memory:"`` gives a private in-memory index.

    Args:
        path: The database file (its directory must exist) or ``":memory:"``.
        busy_timeout_s: How long a write waits for another process's write lock
            before raising ``UnavailableError``.
        checkpoint_pages: Pages the write-ahead log holds before a commit checkpoints
            it into the file (``WAL_CHECKPOINT_PAGES``).

    Call ``close()`` when done; it finishes pending work, closes the database
    and stops the worker thread.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_s: float = 5.0,
        checkpoint_pages: int = WAL_CHECKPOINT_PAGES,
    ) -> None:
        if checkpoint_pages < 1:
            raise ConfigurationError(
                f"checkpoint_pages must be at least 1 page, not {checkpoint_pages}"
            )
        self._path = os.fspath(path)
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
            else ThreadPoolExecutor(max_workers=_READERS, thread_name_prefix="cogsub-index-read")
        )
        self._closed = False
        # Everything below is touched only on the worker thread.
        self._conn: sqlite3.Connection | None = None
        self._vectors: _Vectors | None = None
        self._data_version = -1
        # One connection per reader thread, each used only by its own thread.
        self._local = threading.local()
        self._read_conns: list[sqlite3.Connection] = []
        self._read_conns_lock = threading.Lock()
        self._writer_opened = False
        # A forget whose log truncate found a reader: the log may still hold the
        # forgotten text, so later calls try again (monotonic time of the next try;
        # set on the worker thread, read by _read as a hint).
        self._truncate_owed_at: float | None = None
        self._truncate_queued = False  # a read has queued a retry the writer has not run yet
        _one_blas_thread()

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

    async def _run(self, fn: Callable[..., _T], *args: Any) -> _T:
        if self._closed:
            raise RuntimeError("this SqliteMemoryIndex is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, fn, args)

    def _call(self, fn: Callable[..., _T], args: tuple[Any, ...]) -> _T:
        with _sqlite_errors():
            if self._conn is None:
                self._conn = self._open()
            result = fn(self._conn, *args)
            if self._truncate_due():
                self._retry_truncate(self._conn)
            return result

    def _truncate_due(self) -> bool:
        # Read once: the worker thread may clear it between two reads.
        owed_at = self._truncate_owed_at
        return owed_at is not None and time.monotonic() >= owed_at

    async def _read(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run a read-only ``fn`` on a reader connection (the worker's, in memory)."""
        if self._reader is None:
            return await self._run(fn, *args)
        if self._closed:
            raise RuntimeError("this SqliteMemoryIndex is closed")
        if not self._writer_opened:
            # The writer switches a new file to WAL and creates the schema; switching
            # the journal mode does not wait for busy_timeout, so readers open after it.
            await self._run(_nothing)
            self._writer_opened = True
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._reader, self._read_call, fn, args)
        # After the read, which would otherwise be in the log the retry needs empty.
        if self._truncate_due() and not self._truncate_queued and not self._closed:
            # Recall-only traffic retries it too, on the writer thread, not waited for.
            self._truncate_queued = True
            self._executor.submit(self._call, _nothing, ())
        return result

    def _read_call(self, fn: Callable[..., _T], args: tuple[Any, ...]) -> _T:
        with _sqlite_errors():
            conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
            if conn is None:
                # _read opened the writer first (WAL, schema); close() closes this
                # connection after the pool has stopped.
                conn = self._open_reader()
                self._local.conn = conn
                with self._read_conns_lock:
                    self._read_conns.append(conn)
            return fn(conn, *args)

    def _open_reader(self) -> sqlite3.Connection:
        """A read-only connection to the file the writer has set up (WAL, schema)."""
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            conn.execute(f"PRAGMA cache_size = -{_READER_CACHE_MIB * 1024}")
            conn.execute("PRAGMA query_only = ON")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            if self._path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
                # FULL: an acknowledged upsert survives power loss, not only a crash.
                conn.execute("PRAGMA synchronous = FULL")
                conn.execute(f"PRAGMA wal_autocheckpoint = {self._checkpoint_pages}")
            conn.execute(f"PRAGMA cache_size = -{_WRITER_CACHE_MIB * 1024}")
            # ON, not FAST: a forget frees whole FTS segment pages (_purge_fts), and FAST
            # leaves pages moved to the freelist as they were, forgotten text included.
            conn.execute("PRAGMA secure_delete = ON")
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if version > SCHEMA_VERSION:
                raise ConfigurationError(
                    f"index schema version {version} is newer than this code ({SCHEMA_VERSION})"
                )
            _identity_per_bank(conn)
            conn.executescript(f"BEGIN IMMEDIATE;{_SCHEMA}COMMIT;")
            _split_text_by_bank(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    async def ensure(self, *, dimension: int) -> None:
        """Record the vector dimension; ``ConfigurationError`` if another one is recorded."""
        if dimension < 1:
            raise ConfigurationError(f"vector dimension must be positive, not {dimension}")
        await self._run(self._ensure, dimension)

    def _ensure(self, conn: sqlite3.Connection, dimension: int) -> None:
        with _transaction(conn, write=True):
            (recorded,) = conn.execute("SELECT dimension FROM index_state").fetchone()
            if recorded is None:
                conn.execute("UPDATE index_state SET dimension = ?", (dimension,))
            elif recorded != dimension:
                raise ConfigurationError(
                    f"the index holds {recorded}-dimensional vectors, not {dimension}"
                )

    async def upsert(self, documents: Sequence[IndexDocument]) -> None:
        """Insert or replace documents by ``event_id``, all in one transaction.

        Raises:
            ConfigurationError: an embedding whose length is not the index's dimension.
            InvalidInputError: a timestamp that is not ISO-8601, or a non-finite embedding.
        """
        if documents:
            await self._run(self._upsert, list(documents))

    def _upsert(self, conn: sqlite3.Connection, documents: list[IndexDocument]) -> None:
        prepared = [_prepared(index, doc) for index, doc in enumerate(documents)]
        with _transaction(conn, write=True):
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
            rows = _write_all(conn, documents, prepared, seq)
            conn.execute("UPDATE index_state SET seq = ?", (seq,))
        self._after_write(seq, lambda vectors: vectors.put(rows))

    def _after_write(self, seq: int, apply: Callable[[_Vectors], object]) -> None:
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

    async def get(self, bank_id: str, event_id: str) -> IndexDocument | None:
        """The document ``event_id`` of ``bank_id``, or ``None``."""
        return await self._read(self._get, bank_id, event_id)

    @staticmethod
    def _get(conn: sqlite3.Connection, bank_id: str, event_id: str) -> IndexDocument | None:
        found = conn.execute(
            "SELECT body, embedding FROM documents WHERE event_id = ? AND bank_id = ?",
            (event_id, bank_id),
        ).fetchone()
        return None if found is None else _document(*found)

    async def present(self, bank_id: str, event_ids: Sequence[str]) -> set[str]:
        """Which of ``event_ids`` are documents of ``bank_id``: one query, no bodies read."""
        if not event_ids:
            return set()
        return await self._read(self._present, bank_id, list(dict.fromkeys(event_ids)))

    @staticmethod
    def _present(conn: sqlite3.Connection, bank_id: str, event_ids: list[str]) -> set[str]:
        rows = conn.execute(
            f"SELECT event_id FROM documents WHERE {_BY_IDS_IN_BANK}",
            (bank_id, json.dumps(event_ids)),
        ).fetchall()
        return {event_id for (event_id,) in rows}

    async def search_text(self, query: str, filters: SearchFilters, *, size: int) -> list[Hit]:
        """BM25 hits (higher is better) over summary and tags; no query terms means no hits."""
        _check_size(size)
        terms = query_terms(query)
        if not terms or size == 0 or _matches_nothing(filters):
            return []
        return await self._read(self._search_text, terms, filters, size)

    def _search_text(
        self, conn: sqlite3.Connection, terms: list[str], filters: SearchFilters, size: int
    ) -> list[Hit]:
        with _transaction(conn, write=False):
            ranked = _rank_text(conn, terms, filters, size)
            return _hits(conn, ranked, bank_id=filters.bank_id)

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
        return await self._run(self._search_vector, _unit(query), filters, size)

    def _search_vector(
        self,
        conn: sqlite3.Connection,
        query: npt.NDArray[np.float32],
        filters: SearchFilters,
        size: int,
    ) -> list[Hit]:
        vectors = self._current_vectors(conn)
        if vectors is None:
            return []
        if query.shape[0] != vectors.dimension:
            rule = f"must have {vectors.dimension} values, not {query.shape[0]}"
            raise InvalidInputError([FieldProblem("vector", rule)])
        return _hits(conn, vectors.search(query, filters, size), bank_id=filters.bank_id)

    def _current_vectors(self, conn: sqlite3.Connection) -> _Vectors | None:
        """The vector cache, built on first use and caught up after other connections' writes."""
        (data_version,) = conn.execute("PRAGMA data_version").fetchone()
        vectors = self._vectors
        if vectors is not None and data_version == self._data_version:
            return vectors
        self._data_version = data_version
        with _transaction(conn, write=False):
            seq, dimension = conn.execute("SELECT seq, dimension FROM index_state").fetchone()
            if dimension is None:
                return None
            if vectors is None:
                began = time.perf_counter()
                vectors = _Vectors(dimension, seq)
                (total,) = conn.execute("SELECT count(*) FROM documents").fetchone()
                vectors.reserve(total + total // 8)
                cursor = conn.execute(f"SELECT {_ROW_COLUMNS} FROM documents")
                while chunk := cursor.fetchmany(_LOAD_CHUNK):
                    vectors.put(chunk)
                elapsed_ms = round((time.perf_counter() - began) * 1000)
                _log.info("index_vectors_loaded", documents=vectors.used, elapsed_ms=elapsed_ms)
            elif seq != vectors.seq:
                deleted = conn.execute(
                    "SELECT bank_id, event_id FROM tombstones WHERE seq > ?", (vectors.seq,)
                ).fetchall()
                for bank_id, event_id in deleted:
                    vectors.remove(bank_id, event_id)
                cursor = conn.execute(
                    f"SELECT {_ROW_COLUMNS} FROM documents WHERE seq > ?", (vectors.seq,)
                )
                while chunk := cursor.fetchmany(_LOAD_CHUNK):
                    vectors.put(chunk)
        vectors.seq = seq
        self._vectors = vectors
        return vectors

    async def update(self, bank_id: str, event_id: str, patch: DocumentPatch) -> IndexDocument:
        """Apply ``patch`` atomically and return the new document.

        Raises:
            NotFoundError: no document ``event_id`` in ``bank_id``.
            InvalidInputError: the patch would put a field out of its range.
        """
        return await self._run(self._update, bank_id, event_id, patch)

    def _update(
        self, conn: sqlite3.Connection, bank_id: str, event_id: str, patch: DocumentPatch
    ) -> IndexDocument:
        with _transaction(conn, write=True):
            (seq,) = conn.execute("SELECT seq + 1 FROM index_state").fetchone()
            patched = _patch_row(conn, bank_id, event_id, patch, seq)
            if patched is None:
                raise NotFoundError(f"no document {event_id} in bank {bank_id}")
            conn.execute("UPDATE index_state SET seq = ?", (seq,))
        self._after_write(seq, patched.apply)
        return patched.doc

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
        return await self._run(self._update_across, by_bank)

    def _update_across(
        self, conn: sqlite3.Connection, by_bank: dict[str, dict[str, DocumentPatch]]
    ) -> int:
        patched: list[_Patched] = []
        decayed = 0
        with _transaction(conn, write=True):
            (seq,) = conn.execute("SELECT seq + 1 FROM index_state").fetchone()
            for bank_id, patches in by_bank.items():
                decays = {i: p.decay_factor for i, p in patches.items() if _sets_only_decay(p)}
                decayed += _set_decay(conn, bank_id, decays, seq)
                patched += [
                    done
                    for event_id, patch in patches.items()
                    if event_id not in decays
                    and (done := _patch_row(conn, bank_id, event_id, patch, seq)) is not None
                ]
            if patched or decayed:
                conn.execute("UPDATE index_state SET seq = ?", (seq,))

        def apply(vectors: _Vectors) -> None:
            for done in patched:
                done.apply(vectors)

        if patched or decayed:
            self._after_write(seq, apply)
        return len(patched) + decayed

    async def decay_page(
        self, bank_id: str, step: DecayStep, *, size: int, after: str | None = None
    ) -> DecayedPage:
        """Decay the next ``size`` documents of the bank after ``after``, in one transaction."""
        check_decay_page_size(size)
        return await self._run(self._decay_page, bank_id, step, size, after)

    @staticmethod
    def _decay_page(
        conn: sqlite3.Connection, bank_id: str, step: DecayStep, size: int, after: str | None
    ) -> DecayedPage:
        # The whole step in SQL: reading each document out to patch it spent most of a
        # round's time under load. No cache holds decay_factor, so seq stays as it is
        # (other connections have nothing to catch up on).
        start = "" if after is None else "AND event_id > ?"
        bounds = (bank_id,) if after is None else (bank_id, after)
        with _transaction(conn, write=True):
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
                    _epoch_us(step.before),
                    step.floor,
                    step.floor,
                    step.rate,
                ),
            )
        return DecayedPage(int(cursor.rowcount), str(last))

    async def delete(self, bank_id: str, event_id: str) -> bool:
        """Remove a document; ``True`` if it existed in ``bank_id``."""
        return await self.delete_many(bank_id, [event_id]) == 1

    async def delete_many(self, bank_id: str, event_ids: Sequence[str]) -> int:
        """Remove the documents ``event_ids`` of ``bank_id`` in one transaction; how many.

        Ids of another bank, unknown ids and repeats count 0. The rows, their FTS
        entries and their vectors go together; other connections catch up from
        the tombstones written in the same transaction.
        """
        wanted = list(dict.fromkeys(event_ids))
        if not wanted:
            return 0
        return await self._run(self._delete_many, bank_id, wanted)

    def _delete_many(self, conn: sqlite3.Connection, bank_id: str, event_ids: list[str]) -> int:
        with _transaction(conn, write=True):
            # One JSON parameter however long the list: no bound-parameter limit to chunk for.
            found: list[tuple[int, str]] = conn.execute(
                f"SELECT doc_id, event_id FROM documents WHERE {_BY_IDS_IN_BANK}",
                (bank_id, json.dumps(event_ids)),
            ).fetchall()
            if not found:
                return 0
            (seq,) = conn.execute("SELECT seq + 1 FROM index_state").fetchone()
            doc_ids = (json.dumps([doc_id for doc_id, _ in found]),)
            conn.execute(
                "DELETE FROM documents WHERE doc_id IN (SELECT value FROM json_each(?))", doc_ids
            )
            text_table = _text_table(conn, bank_id)
            if text_table is not None:
                conn.execute(
                    f"DELETE FROM {text_table} WHERE rowid IN (SELECT value FROM json_each(?))",
                    doc_ids,
                )
            _insert_rows(
                conn,
                "INSERT OR REPLACE INTO tombstones (bank_id, event_id, seq) VALUES (?, ?, ?)",
                [(bank_id, event_id, seq) for _, event_id in found],
            )
            conn.execute("UPDATE index_state SET seq = ?", (seq,))
            if text_table is not None:
                _purge_text(conn, text_table)
        gone = [event_id for _, event_id in found]
        self._after_write(seq, lambda vectors: vectors.remove_all(bank_id, gone))
        self._truncate_wal(conn)
        return len(found)

    def _truncate_wal(self, conn: sqlite3.Connection) -> None:
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
            self._truncate_owed_at = time.monotonic() + _TRUNCATE_RETRY_S
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
            _log.warning("index_wal_not_truncated", path=self._path, retry_s=_TRUNCATE_RETRY_S)
        return not busy

    async def count(self, bank_id: str | None = None) -> int:
        """Documents in ``bank_id``, or in all banks."""
        return await self._read(self._count, bank_id)

    @staticmethod
    def _count(conn: sqlite3.Connection, bank_id: str | None) -> int:
        if bank_id is None:
            (total,) = conn.execute("SELECT count(*) FROM documents").fetchone()
        else:
            (total,) = conn.execute(
                "SELECT count(*) FROM documents WHERE bank_id = ?", (bank_id,)
            ).fetchone()
        return int(total)

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
        return await self._read(self._neighbours, filters, placed, each_side, window_us, skip)

    @staticmethod
    def _neighbours(
        conn: sqlite3.Connection,
        filters: SearchFilters,
        anchors: Sequence[IndexDocument],
        each_side: int,
        window_us: int | None,
        skip: set[str],
    ) -> list[IndexDocument]:
        # Ids first, from the session index alone; bodies only for the new ones.
        where, params = _filter_sql(filters)
        session = "json_extract(d.body, '$.session_id') = ?"
        wanted: dict[str, None] = {}
        reach = _MAX_REACH_US if window_us is None else window_us
        for anchor in anchors:
            at_us = _timestamp_us(anchor.timestamp)
            sides = (
                (_BEFORE, "DESC", _ABOVE, at_us - reach),
                (_AFTER, "ASC", _BELOW, at_us + reach),
            )
            for side, order, bound, limit_us in sides:
                rows = conn.execute(
                    f"SELECT d.event_id FROM documents AS d"  # noqa: S608 - clauses are ours
                    f" WHERE {where} AND {session} AND {side} AND {bound}"
                    f" ORDER BY d.ts_us {order}, d.event_id {order} LIMIT ?",
                    (*params, anchor.session_id, at_us, anchor.event_id, limit_us, each_side),
                ).fetchall()
                wanted.update((event_id, None) for (event_id,) in rows if event_id not in skip)
        if not wanted:
            return []
        rows = conn.execute(
            f"SELECT event_id, body, embedding FROM documents WHERE {_BY_IDS_IN_BANK}",
            (filters.bank_id, json.dumps(list(wanted))),
        ).fetchall()
        found = {event_id: _document(body, blob) for event_id, body, blob in rows}
        return [found[event_id] for event_id in wanted if event_id in found]

    async def scan(
        self, filters: SearchFilters, *, size: int, after: str | None = None
    ) -> list[IndexDocument]:
        """Documents matching ``filters`` in ``event_id`` order, after the cursor."""
        return await self._listed(self._scan, filters, size, after)

    @staticmethod
    def _scan(
        conn: sqlite3.Connection, filters: SearchFilters, size: int, after: str | None
    ) -> list[IndexDocument]:
        where, params = _filter_sql(filters)
        if after is not None:
            where += " AND d.event_id > ?"
            params.append(after)
        rows = conn.execute(
            f"SELECT d.body, d.embedding FROM documents AS d WHERE {where}"  # noqa: S608 - clauses are ours
            " ORDER BY d.event_id LIMIT ?",
            (*params, size),
        ).fetchall()
        return [_document(body, blob) for body, blob in rows]

    async def scan_in_replay_order(
        self, filters: SearchFilters, *, size: int, after: IndexDocument | None = None
    ) -> list[IndexDocument]:
        """Documents matching ``filters`` in replay order, after the cursor's place."""
        return await self._listed(self._scan_in_replay_order, filters, size, after)

    async def _listed(
        self,
        read: Callable[..., list[IndexDocument]],
        filters: SearchFilters,
        size: int,
        after: str | IndexDocument | None,
    ) -> list[IndexDocument]:
        """A scan's read on a reader connection, or nothing for a size 0 or an empty filter set."""
        _check_size(size)
        if size == 0 or _matches_nothing(filters):
            return []
        return await self._read(read, filters, size, after)

    @staticmethod
    def _scan_in_replay_order(
        conn: sqlite3.Connection, filters: SearchFilters, size: int, after: IndexDocument | None
    ) -> list[IndexDocument]:
        # The index orders each fact type apart: the first ``size`` of each type (keys
        # only, from the index), merged, are the first ``size`` of the union.
        lanes: list[FactType | None] = [*FactType, None]
        if filters.fact_types is not None:
            lanes = [*sorted(filters.fact_types)]
        where, params = _filter_sql(replace(filters, fact_types=None))
        if after is not None:
            where += f" AND {_AFTER_IN_REPLAY}"
            decay, importance = after.decay_factor, after.importance_score
            params += [decay, decay, importance, importance, after.event_id]
        keys: list[tuple[float, float, str, int]] = []
        for lane in lanes:
            typed = "d.fact_type IS NULL" if lane is None else "d.fact_type = ?"
            rows = conn.execute(
                f"SELECT -{_DECAY}, -d.importance_score, d.event_id, d.doc_id"  # noqa: S608 - clauses are ours
                f" FROM documents AS d WHERE {where} AND {typed}"
                f" ORDER BY {_IN_REPLAY_ORDER} LIMIT ?",
                (*params, *([] if lane is None else [lane.value]), size),
            ).fetchall()
            keys += rows
        chosen = [doc_id for *_, doc_id in sorted(keys)[:size]]
        rows = conn.execute(
            "SELECT d.body, d.embedding FROM documents AS d"
            " WHERE d.doc_id IN (SELECT value FROM json_each(?))",
            (json.dumps(chosen),),
        ).fetchall()
        return sorted((_document(body, blob) for body, blob in rows), key=replay_order)

    async def close(self) -> None:
        """Close the database and stop the worker thread (idempotent)."""
        if self._closed:
            return
        # Refuse new work first, so nothing queued after _close reopens the database.
        self._closed = True
        loop = asyncio.get_running_loop()
        if self._reader is not None:
            await asyncio.to_thread(self._reader.shutdown, wait=True)
            self._close_readers()
        await loop.run_in_executor(self._executor, self._close)
        await asyncio.to_thread(self._executor.shutdown, wait=True)

    def _close(self) -> None:
        conn, self._conn, self._vectors = self._conn, None, None
        if conn is None:
            return
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


def _text_table(conn: sqlite3.Connection, bank_id: str) -> str | None:
    """The FTS5 table holding ``bank_id``'s rows; ``None`` if the bank never had any."""
    found = conn.execute(
        "SELECT text_table FROM text_tables WHERE bank_id = ?", (bank_id,)
    ).fetchone()
    return None if found is None else f"text_{found[0]}"


def _searched_table(conn: sqlite3.Connection, bank_id: str) -> tuple[str, bool] | None:
    """``_text_table`` and whether the bank is alone in it, in one lookup."""
    found = conn.execute(
        "SELECT t.text_table, (SELECT count(*) FROM (SELECT 1 FROM text_tables AS o"
        " WHERE o.text_table = t.text_table LIMIT 2)) FROM text_tables AS t WHERE t.bank_id = ?",
        (bank_id,),
    ).fetchone()
    return None if found is None else (f"text_{found[0]}", found[1] == 1)


def _text_table_to_write(conn: sqlite3.Connection, bank_id: str) -> str:
    """``_text_table``, given to a new bank inside the caller's write transaction.

    Each bank has a table of its own until ``_TEXT_TABLES`` banks exist; later
    banks share them in turn. A search reads and scores only its table's rows,
    so its cost follows its bank's size instead of the whole index's, and
    BM25's document frequencies are its bank's own (its table's, when shared).
    """
    table = _text_table(conn, bank_id)
    if table is not None:
        return table
    (banks,) = conn.execute("SELECT count(*) FROM text_tables").fetchone()
    number = banks % _TEXT_TABLES
    conn.execute("INSERT INTO text_tables (bank_id, text_table) VALUES (?, ?)", (bank_id, number))
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS text_{number} USING fts5({_TEXT_COLUMNS})")
    return f"text_{number}"


def _identity_per_bank(conn: sqlite3.Connection) -> None:
    """Rebuild a schema-2 file, where ``event_id`` alone was unique, for per-bank identity.

    The rows keep their ``doc_id`` (the FTS tables' rowids); the tombstones only let
    live caches catch up, and no cache outlives the process that opens an older file.
    One transaction: a crash leaves the old tables whole, and the next open redoes it.
    """
    with _transaction(conn, write=True):
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        table = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'documents'"
        if version >= SCHEMA_VERSION or conn.execute(table).fetchone() is None:
            return
        started = time.perf_counter()
        conn.execute(f"CREATE TABLE documents_per_bank ({_DOCUMENT_COLUMNS})")
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
    with _transaction(conn, write=True):
        shared = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'documents_fts'"
        if conn.execute(shared).fetchone() is None:
            return
        started = time.perf_counter()
        banks = [bank for (bank,) in conn.execute("SELECT DISTINCT bank_id FROM documents")]
        for bank_id in banks:
            conn.execute(
                f"INSERT INTO {_text_table_to_write(conn, bank_id)} (rowid, summary, tags)"
                " SELECT doc_id, summary,"
                " COALESCE((SELECT group_concat(value, ' ') FROM json_each(d.tags)), '')"
                " FROM documents AS d WHERE bank_id = ?",
                (bank_id,),
            )
        conn.execute("DROP TABLE documents_fts")
    elapsed_ms = round(1000 * (time.perf_counter() - started))
    _log.info("index_text_split_by_bank", banks=len(banks), elapsed_ms=elapsed_ms)


def _purge_text(conn: sqlite3.Connection, table: str) -> None:
    """Drop deleted rows' terms from an FTS table itself, not only from its content.

    An FTS5 delete only appends a "delete" entry: the row's terms stay in the
    older segments until a merge reaches them, and SQLite before 3.42 has no
    ``secure-delete`` option. ``optimize`` merges every segment into one,
    leaving the deleted terms out; with ``secure_delete`` the pages it frees
    are zeroed. It rewrites the bank's table (~0.2 s at 110k documents), a
    price paid per forget, never per ingested batch.
    """
    conn.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")


def _prepared(index: int, doc: IndexDocument) -> tuple[int, bytes]:
    """The event time in epoch microseconds and the embedding BLOB, validated."""
    vector = np.asarray(doc.embedding, dtype="<f4")
    if not np.isfinite(vector).all():
        problem = FieldProblem(f"documents[{index}].embedding", "must hold finite numbers")
        raise InvalidInputError([problem])
    return _timestamp_us(doc.timestamp), vector.tobytes()


_INSERT_DOCUMENTS = (
    "INSERT INTO documents (bank_id, fact_type, ts_us, importance_score, tags, seq,"
    " summary, body, embedding, event_id, doc_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPDATE_DOCUMENT = (
    "UPDATE documents SET bank_id = ?, fact_type = ?, ts_us = ?, importance_score = ?,"
    " tags = ?, seq = ?, summary = ?, body = ?, embedding = ? WHERE doc_id = ?"
)


def _insert_text(table: str) -> str:
    return f"INSERT INTO {table} (rowid, summary, tags) VALUES (?, ?, ?)"


def _write_all(
    conn: sqlite3.Connection,
    documents: Sequence[IndexDocument],
    prepared: Sequence[tuple[int, bytes]],
    seq: int,
) -> list[tuple[Any, ...]]:
    """Insert or update documents and their FTS rows; returns them as ``_ROW_COLUMNS``.

    One lookup and one ``executemany`` per kind of change for the whole batch,
    instead of four statements per document: an ingestion batch is hundreds of
    new documents, and each statement is a round trip through the sqlite3 module.
    """
    ids = [(doc.bank_id, doc.event_id) for doc in documents]
    if len(set(ids)) != len(ids):  # a later copy must see the earlier one: one at a time
        return [
            _write(conn, doc, ts_us, blob, seq)
            for doc, (ts_us, blob) in zip(documents, prepared, strict=True)
        ]
    found: dict[tuple[str, str], tuple[int, str, str]] = {
        (bank_id, event_id): (doc_id, summary, tags)
        for event_id, doc_id, bank_id, summary, tags in conn.execute(
            "SELECT d.event_id, d.doc_id, d.bank_id, d.summary, d.tags FROM json_each(?) AS j"
            " JOIN documents AS d"
            " ON d.bank_id = j.value ->> '$[0]' AND d.event_id = j.value ->> '$[1]'",
            (json.dumps(ids),),
        )
    }
    # New rows take the ids SQLite itself would give them (one past the largest).
    (next_id,) = conn.execute("SELECT COALESCE(MAX(doc_id), 0) + 1 FROM documents").fetchone()
    inserts: list[tuple[Any, ...]] = []
    updates: list[tuple[Any, ...]] = []
    stale: dict[str, list[tuple[int]]] = {}
    texts: dict[str, list[tuple[int, str, str]]] = {}
    rows: list[tuple[Any, ...]] = []
    for doc, (ts_us, blob) in zip(documents, prepared, strict=True):
        fact, tags, values = _columns(doc, ts_us, blob, seq)
        old = found.get((doc.bank_id, doc.event_id))
        if old is None:
            doc_id = next_id
            next_id += 1
            inserts.append((*values, doc.event_id, doc_id))
            fts_stale = True
        else:
            doc_id, old_summary, old_tags = old
            updates.append((*values, doc_id))
            fts_stale = (old_summary, old_tags) != (doc.summary, tags)
            if fts_stale:
                stale.setdefault(doc.bank_id, []).append((doc_id,))
        if fts_stale:
            texts.setdefault(doc.bank_id, []).append((doc_id, doc.summary, " ".join(doc.tags)))
        rows.append(
            (doc_id, doc.event_id, doc.bank_id, fact, ts_us, doc.importance_score, tags, blob)
        )
    if inserts:
        _insert_rows(conn, _INSERT_DOCUMENTS, inserts)
        conn.execute(
            "DELETE FROM tombstones WHERE (bank_id, event_id) IN"
            " (SELECT value ->> '$[0]', value ->> '$[1]' FROM json_each(?))",
            (json.dumps([[row[0], row[-2]] for row in inserts]),),
        )
    if updates:
        conn.executemany(_UPDATE_DOCUMENT, updates)
    for bank_id, bank_texts in texts.items():
        table = _text_table_to_write(conn, bank_id)
        if bank_id in stale:
            conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", stale[bank_id])
        _insert_rows(conn, _insert_text(table), bank_texts)
    return rows


#: Rows per multi-row INSERT: well inside SQLite's bound-parameter limit (32,766 at least).
_ROWS_PER_INSERT = 500


def _insert_rows(conn: sqlite3.Connection, insert: str, rows: Sequence[tuple[Any, ...]]) -> None:
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
    body = doc.model_dump_json(exclude={"embedding"})
    return (
        fact,
        tags,
        (doc.bank_id, fact, ts_us, doc.importance_score, tags, seq, doc.summary, body, blob),
    )


def _write(
    conn: sqlite3.Connection, doc: IndexDocument, ts_us: int, blob: bytes, seq: int
) -> tuple[Any, ...]:
    """Insert or update one document and its FTS row; returns it as ``_ROW_COLUMNS``."""
    fact, tags, values = _columns(doc, ts_us, blob, seq)
    found = conn.execute(
        "SELECT doc_id, summary, tags FROM documents WHERE bank_id = ? AND event_id = ?",
        (doc.bank_id, doc.event_id),
    ).fetchone()
    if found is None:
        (doc_id,) = conn.execute(
            "INSERT INTO documents (bank_id, fact_type, ts_us, importance_score, tags, seq,"
            " summary, body, embedding, event_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " RETURNING doc_id",
            (*values, doc.event_id),
        ).fetchone()
        conn.execute(
            "DELETE FROM tombstones WHERE bank_id = ? AND event_id = ?",
            (doc.bank_id, doc.event_id),
        )
        fts_stale = True
    else:
        doc_id, old_summary, old_tags = found
        conn.execute(_UPDATE_DOCUMENT, (*values, doc_id))
        fts_stale = (old_summary, old_tags) != (doc.summary, tags)
    if fts_stale:
        table = _text_table_to_write(conn, doc.bank_id)
        if found is not None:
            conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (doc_id,))
        conn.execute(_insert_text(table), (doc_id, doc.summary, " ".join(doc.tags)))
    return (doc_id, doc.event_id, doc.bank_id, fact, ts_us, doc.importance_score, tags, blob)


def _rank_text(
    conn: sqlite3.Connection, terms: list[str], filters: SearchFilters, size: int
) -> list[tuple[int, float]]:
    """``(doc_id, bm25)`` of the best ``size`` rows for the OR of ``terms``, best first."""
    searched = _searched_table(conn, filters.bank_id)
    if searched is None:
        return []
    table, alone = searched
    sql, params = _ranking_sql(table, filters, alone=alone)

    def ranked(expression: str) -> list[tuple[int, float]]:
        return conn.execute(sql, (expression, *params, size)).fetchall()

    if len(terms) > 1:
        doc_freqs = [
            conn.execute(
                f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (quote_fts5(term),)
            ).fetchone()[0]
            for term in terms
        ]
        # The table's own row count, the N of its bm25(): one small row a document.
        (total,) = conn.execute(f"SELECT count(*) FROM {table}_docsize").fetchone()
        terms, doc_freqs = fts5_weighty_terms(terms, doc_freqs, total, budget=_STAGE_BUDGET)
        stages = (
            fts5_stages(terms, doc_freqs, total, budget=_STAGE_BUDGET)
            if fts5_staging_pays(doc_freqs)
            else None
        )
        if stages is not None:
            best: list[tuple[int, float]] = []
            for stage in stages:
                for expression in stage.expressions:
                    best.extend(ranked(expression))
                best = sorted(best, key=lambda hit: (-hit[1], hit[0]))[:size]
                if len(best) == size and best[-1][1] > stage.rest_bound:
                    break
            return best
    return ranked(fts5_match(terms) or "")


def _ranking_sql(table: str, filters: SearchFilters, *, alone: bool) -> tuple[str, list[Any]]:
    """The query ranking ``table``'s rows for ``filters``: MATCH, then filter params, then LIMIT.

    ``alone``: the filtered bank is the only one in ``table``.
    """
    if alone and filters == SearchFilters(filters.bank_id):
        # The table is the bank: no join to filter by (it was half of a query's time).
        sql = (
            f"SELECT rowid, -bm25({table}, {_BM25_WEIGHTS}) AS score FROM {table}"
            f" WHERE {table} MATCH ? ORDER BY score DESC, rowid LIMIT ?"
        )
        return sql, []
    clauses, params = _filter_sql(filters)
    # CROSS JOIN keeps FTS the outer loop; filters run before bm25() is computed.
    sql = (
        f"SELECT d.doc_id, -bm25({table}, {_BM25_WEIGHTS}) AS score FROM {table}"
        f" CROSS JOIN documents AS d INDEXED BY documents_filter ON d.doc_id = {table}.rowid"
        f" WHERE {table} MATCH ? AND {clauses} ORDER BY score DESC, d.doc_id LIMIT ?"
    )
    return sql, params


def _hits(
    conn: sqlite3.Connection, ranked: list[tuple[int, float]], *, bank_id: str | None = None
) -> list[Hit]:
    """Documents for ranked ``doc_id``s, in order; rows gone or of another bank are skipped."""
    found = {}
    for doc_id, bank, body, blob in conn.execute(
        "SELECT doc_id, bank_id, body, embedding FROM documents"
        " WHERE doc_id IN (SELECT value FROM json_each(?))",
        (json.dumps([doc_id for doc_id, _ in ranked]),),
    ):
        found[doc_id] = (bank, body, blob)
    hits = []
    for doc_id, score in ranked:
        row = found.get(doc_id)
        if row is not None and (bank_id is None or row[0] == bank_id):
            hits.append(Hit(_document(row[1], row[2]), float(score)))
    return hits


def _check_size(size: int) -> None:
    if size < 0:
        raise InvalidInputError([FieldProblem("size", "must not be negative")])


def _matches_nothing(filters: SearchFilters) -> bool:
    return filters.fact_types == frozenset() or filters.tags_any == frozenset()


def _filter_sql(filters: SearchFilters) -> tuple[str, list[Any]]:
    """WHERE clauses on ``documents AS d`` for ``filters`` (never empty: bank_id is mandatory)."""
    clauses = ["d.bank_id = ?"]
    params: list[Any] = [filters.bank_id]
    # Sets travel as one JSON array parameter: no limit on their size, no SQL built from them.
    if filters.fact_types is not None:
        clauses.append("d.fact_type IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(sorted(FactType(fact).value for fact in filters.fact_types)))
    if filters.tags_any is not None:
        clauses.append(
            "EXISTS (SELECT 1 FROM json_each(d.tags) AS tag"
            " WHERE tag.value IN (SELECT value FROM json_each(?)))"
        )
        params.append(json.dumps(sorted(filters.tags_any)))
    if filters.since is not None:
        clauses.append("d.ts_us >= ?")
        params.append(_epoch_us(filters.since))
    if filters.until is not None:
        clauses.append("d.ts_us < ?")
        params.append(_epoch_us(filters.until))
    if filters.min_importance is not None:
        clauses.append("d.importance_score >= ?")
        params.append(filters.min_importance)
    return " AND ".join(clauses), params


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


@dataclass(frozen=True)
class _Patched:
    """A patched document, and its new vector-cache row when its tags changed."""

    doc: IndexDocument
    cache_row: tuple[Any, ...] | None

    def apply(self, vectors: _Vectors) -> None:
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
    old = _document(body, blob)
    doc = patch.applied_to(old)
    if doc == old:
        return _Patched(old, None)
    if doc.tags != old.tags:
        return _Patched(doc, _write(conn, doc, _timestamp_us(doc.timestamp), blob, seq))
    conn.execute(
        "UPDATE documents SET importance_score = ?, body = ?, seq = ? WHERE doc_id = ?",
        (doc.importance_score, doc.model_dump_json(exclude={"embedding"}), seq, doc_id),
    )
    return _Patched(doc, None)
