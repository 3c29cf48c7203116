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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cogsub.core.documents import IndexDocument
from cogsub.index.ports import Embeddings, Hit, NeighbourWindow, SearchFilters
from cogsub.index.sqlite.reads import neighbour_doc_ids
from cogsub.index.sqlite.text import rank_text
from cogsub.sqlite_support import transaction

__all__ = ["Gathered", "RecallAsk", "gather"]


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


def gather(
    conn: sqlite3.Connection, ask: RecallAsk, vector_ranked: Sequence[tuple[int, float]]
) -> Gathered:
    """Text hits, the vector hits ``vector_ranked`` names and their neighbours, in one snapshot."""
    bank = ask.filters.bank_id
    dimension = ask.query.shape[0]
    with transaction(conn, write=False):
        text_ranked = (
            rank_text(conn, ask.terms, ask.filters, ask.text_pool)
            if ask.terms and ask.text_pool
            else []
        )
        found = _by_doc_id(conn, [d for d, _ in (*text_ranked, *vector_ranked)], bank)
        text = [Hit(found[d][0], s) for d, s in text_ranked if d in found]
        vector = [Hit(found[d][0], s) for d, s in vector_ranked if d in found]
        near = _neighbours(conn, ask, text, vector)
    documents = {doc.event_id: blob for doc, blob in found.values()}
    documents.update((doc.event_id, blob) for doc, blob in near)
    return Gathered(text, vector, [doc for doc, _ in near], _matrix(documents, dimension))


def _neighbours(
    conn: sqlite3.Connection, ask: RecallAsk, text: list[Hit], vector: list[Hit]
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
    found = _by_doc_id(conn, ids, ask.filters.bank_id)
    return [found[doc_id] for doc_id in ids if doc_id in found]


def _by_doc_id(
    conn: sqlite3.Connection, doc_ids: list[int], bank_id: str
) -> dict[int, tuple[IndexDocument, bytes]]:
    """Each listed row of ``bank_id`` once, decoded without its vector."""
    if not doc_ids:
        return {}
    rows = conn.execute(
        "SELECT doc_id, body, embedding FROM documents"
        " WHERE doc_id IN (SELECT value FROM json_each(?)) AND bank_id = ?",
        (json.dumps(list(dict.fromkeys(doc_ids))), bank_id),
    ).fetchall()
    return {doc_id: (_bare(body), blob) for doc_id, body, blob in rows}


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
