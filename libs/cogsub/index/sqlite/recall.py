"""Recall's one trip on a reader: its hits, the turns around them, one float32 matrix.

Everything recall reads from the index is read in one read transaction on one
connection, and a document is decoded only if it is returned: its body without
the embedding (a list of 384 floats through pydantic was most of a document's
cost), its vector as a row of one matrix. The vector search itself runs before
(the index holds the cache under its lock); its ids are read in this snapshot,
and a row another connection deleted meanwhile is skipped, as ``hits`` does.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cogsub.core.documents import IndexDocument
from cogsub.index.ports import Embeddings, Hit, NeighbourWindow, SearchFilters
from cogsub.index.sqlite.reads import neighbour_doc_ids
from cogsub.index.sqlite.text import rank_text
from cogsub.sqlite_support import transaction

__all__ = ["DecodedRows", "Gathered", "RecallAsk", "gather"]

#: Decoded documents kept (~2 KB each): a recall reads ~250, so a few banks' worth of recalls.
DECODED_ROWS = 4_096
#: Seconds a decoded document is kept at most: how long a text forgotten by another
#: process may stay in this one's memory (a forget here empties the cache at once).
DECODED_MAX_AGE_S = 300.0


@dataclass(frozen=True)
class RecallAsk:
    """One recall's questions to the index, checked by the facade."""

    terms: list[str]
    query: npt.NDArray[np.float32]  # unit length
    filters: SearchFilters
    text_pool: int
    vector_pool: int
    window: NeighbourWindow | None


@dataclass(frozen=True)
class Gathered:
    """The documents of one trip, with their vectors (no procedure versions yet)."""

    text: list[Hit]
    vector: list[Hit]
    neighbours: list[IndexDocument]
    embeddings: Embeddings


class DecodedRows:
    """Documents recall decoded, and their vectors, kept by row while the row is unchanged.

    A bank's recalls keep meeting the same rows (the LoCoMo banks: ~250 of ~400 each
    time), and decoding a body was a fifth of a recall's time holding the GIL; reading
    the body and the vector again from SQLite only to find the row unchanged was most
    of what was left of the trip's row reads. An entry is the row's ``seq``, its
    document and its vector's bytes: any write gives the row a new ``seq``, so a changed
    row is read and decoded again. Bounded in entries (oldest first out; ~2 KB of
    document and 1.5 KB of vector each at 384 dimensions) and in age, and emptied by the
    facade whenever a write erased rows, so no forgotten text stays here. Documents are
    shared between recalls: nobody changes a returned document.
    """

    def __init__(
        self,
        max_rows: int = DECODED_ROWS,
        max_age_s: float = DECODED_MAX_AGE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rows: dict[int, tuple[int, float, IndexDocument, bytes]] = {}
        self._max_rows = max_rows
        self._max_age_s = max_age_s
        self._clock = clock
        self._lock = threading.Lock()  # two reader threads decode at once

    def __len__(self) -> int:
        return len(self._rows)

    def known(self, doc_id: int, seq: int) -> tuple[IndexDocument, bytes] | None:
        """Row ``doc_id``'s document and vector bytes if kept as written at ``seq``."""
        kept = self._rows.get(doc_id)
        if kept is not None and kept[0] == seq and self._clock() - kept[1] <= self._max_age_s:
            return kept[2], kept[3]
        return None

    def keep(self, doc_id: int, seq: int, body: str, blob: bytes) -> tuple[IndexDocument, bytes]:
        """The document of row ``doc_id`` as written at ``seq`` (``body``), kept with ``blob``."""
        document = _bare(body)
        with self._lock:
            self._rows.pop(doc_id, None)  # a new entry goes to the back of the line
            while len(self._rows) >= self._max_rows:
                del self._rows[next(iter(self._rows))]
            self._rows[doc_id] = (seq, self._clock(), document, blob)
        return document, blob

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()


def gather(
    conn: sqlite3.Connection,
    ask: RecallAsk,
    vector_ranked: Sequence[tuple[int, float]],
    decoded: DecodedRows | None = None,
) -> Gathered:
    """Text hits, the vector hits ``vector_ranked`` names and their neighbours, in one snapshot."""
    bank = ask.filters.bank_id
    dimension = ask.query.shape[0]
    rows = decoded if decoded is not None else DecodedRows(max_rows=1)
    with transaction(conn, write=False):
        text_ranked = (
            rank_text(conn, ask.terms, ask.filters, ask.text_pool)
            if ask.terms and ask.text_pool
            else []
        )
        found = _by_doc_id(conn, [d for d, _ in (*text_ranked, *vector_ranked)], bank, rows)
        text = [Hit(found[d][0], s) for d, s in text_ranked if d in found]
        vector = [Hit(found[d][0], s) for d, s in vector_ranked if d in found]
        near = _neighbours(conn, ask, text, vector, rows)
    documents = {doc.event_id: blob for doc, blob in found.values()}
    documents.update((doc.event_id, blob) for doc, blob in near)
    return Gathered(text, vector, [doc for doc, _ in near], _matrix(documents, dimension))


def _neighbours(
    conn: sqlite3.Connection, ask: RecallAsk, text: list[Hit], vector: list[Hit], rows: DecodedRows
) -> list[tuple[IndexDocument, bytes]]:
    window = ask.window
    if window is None or window.anchors_each <= 0 or window.each_side <= 0:
        return []
    top = window.anchors_each
    anchors = {h.document.event_id: h.document for h in (*text[:top], *vector[:top])}
    placed = [a for a in anchors.values() if a.session_id is not None]
    if not placed:
        return []
    skip = {h.document.event_id for h in (*text, *vector)}
    window_us = None if window.within_s is None else int(window.within_s * 1_000_000)
    ids = neighbour_doc_ids(conn, ask.filters, placed, window.each_side, window_us, skip)
    found = _by_doc_id(conn, ids, ask.filters.bank_id, rows)
    return [found[doc_id] for doc_id in ids if doc_id in found]


def _by_doc_id(
    conn: sqlite3.Connection, doc_ids: list[int], bank_id: str, decoded: DecodedRows
) -> dict[int, tuple[IndexDocument, bytes]]:
    """Each listed row of ``bank_id`` once, decoded without its vector, with its vector's bytes.

    Row versions first (``seq`` sits before the text and the vector in the row, so nothing
    large is read); then body and vector only of the rows not kept at that version.
    """
    if not doc_ids:
        return {}
    listed = json.dumps(list(dict.fromkeys(doc_ids)))
    versions = conn.execute(
        "SELECT doc_id, seq FROM documents"
        " WHERE doc_id IN (SELECT value FROM json_each(?)) AND bank_id = ?",
        (listed, bank_id),
    ).fetchall()
    found: dict[int, tuple[IndexDocument, bytes]] = {}
    missing = []
    for doc_id, seq in versions:
        kept = decoded.known(doc_id, seq)
        if kept is None:
            missing.append(doc_id)
        else:
            found[doc_id] = kept
    if missing:
        rows = conn.execute(
            "SELECT doc_id, seq, body, embedding FROM documents"
            " WHERE doc_id IN (SELECT value FROM json_each(?))",
            (json.dumps(missing),),
        ).fetchall()
        for doc_id, seq, body, blob in rows:
            found[doc_id] = decoded.keep(doc_id, seq, body, blob)
    return found


def _bare(body: str) -> IndexDocument:
    """The document stored as ``body``, its embedding left empty (see ``Candidates``).

    The stored body is a JSON object without the embedding: pydantic parses it with
    an empty one spliced in, in one pass (json.loads then validation took twice as long).
    """
    return IndexDocument.model_validate_json(f'{body[:-1]}, "embedding": []}}')


def _matrix(blobs: dict[str, bytes], dimension: int) -> Embeddings:
    matrix = np.frombuffer(b"".join(blobs.values()), dtype=np.float32)
    rows = {event_id: row for row, event_id in enumerate(blobs)}
    return Embeddings(rows, matrix.reshape(len(blobs), dimension))
