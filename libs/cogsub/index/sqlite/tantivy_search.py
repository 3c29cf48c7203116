"""One bank's text search through its tantivy index, level with SQLite or a little behind it.

A bank's index answers for the rows it holds. When SQLite has committed rows of the bank
the index has not caught up with yet (``catch_up_s`` puts catch-ups off by up to a
second), those rows, and only those, are scored by the bank's FTS5 table, written in
their own transaction, and merged with the index's answer from which their older
versions are left out: every search answers the snapshot, and a bank written without
pause stays on tantivy. Rows whose signals alone were written since (a recall's retrieval
counts) are the index's as they are (``documents.text_seq``). Past ``LAGGING_ROWS`` changed
rows, or ``SOUGHT_ONE_BY_ONE`` older ones among them (retagged, say), FTS5 answers the whole
search: reading them would cost as much.
"""

from __future__ import annotations

import json
import sqlite3

import tantivy

from cogsub.index.ports import SearchFilters
from cogsub.index.sqlite.tantivy_query import passing_rows
from cogsub.index.sqlite.text import BM25_WEIGHTS, searched_table
from cogsub.index.text_query import fts5_match

__all__ = [
    "LAGGING_ROWS",
    "SOUGHT_ONE_BY_ONE",
    "IdGroup",
    "WIDEN",
    "changed_since",
    "id_groups",
    "ranked_in",
    "rescored",
    "rescoring_sql",
    "search_bank",
    "seeking_sql",
]

#: How much further a search fetches when SQLite's filters left fewer than ``size``.
WIDEN = 4
#: Rows of a bank changed since its index's ``seq`` up to which they are scored apart.
LAGGING_ROWS = 2_000
#: Largest step between ids of one run of rows written last (other banks' rows between).
_RUN_GAP = 4_096
#: Older rows written since up to which each is sought in FTS5's match (~0.1 ms each).
SOUGHT_ONE_BY_ONE = 32
#: A query reading some rows from an FTS5 table, and its parameters after the MATCH.
IdGroup = tuple[str, tuple[object, ...]]
_CHANGED_SINCE = "SELECT doc_id FROM documents WHERE text_seq > ? AND +bank_id = ? LIMIT ?"


def ranked_in(
    searcher: tantivy.Searcher,
    query: tantivy.Query,
    conn: sqlite3.Connection,
    filters: SearchFilters,
    size: int,
    *,
    stale: frozenset[int] = frozenset(),
) -> list[tuple[int, float]]:
    """``(doc_id, score)`` of the best ``size`` rows the index holds that pass ``filters`` in
    ``conn``'s snapshot, leaving the ``stale`` ones (changed since) out; best first."""
    # Room for the stale rows the index still ranks (new rows are in no index yet), up to
    # ``size`` more; widening covers the rest.
    wanted = size + min(len(stale), size)
    while True:
        found = searcher.search(query, wanted, count=False).hits
        ids = searcher.fast_field_values("doc_id", [address for _, address in found])
        scored = {
            int(d): float(s)
            for (s, _), d in zip(found, ids, strict=True)
            if d is not None and int(d) not in stale
        }
        kept = passing_rows(conn, scored, filters)
        if len(kept) >= size or len(found) < wanted:
            ranked = sorted(((d, scored[d]) for d in kept), key=lambda h: (-h[1], h[0]))
            return ranked[:size]
        wanted *= WIDEN


def changed_since(conn: sqlite3.Connection, bank_id: str, seq: int) -> frozenset[int] | None:
    """The bank's rows whose text, tags, type or time changed after ``seq`` (``text_seq``:
    not those whose signals alone were written since, which the index holds as they are);
    ``None`` if more than ``LAGGING_ROWS``.

    Read through the ``text_seq`` index ("+bank_id"): the rows of every bank written since,
    which a catch-up keeps to about a second's writes.
    """
    rows = conn.execute(_CHANGED_SINCE, (seq, bank_id, LAGGING_ROWS + 1)).fetchall()
    return None if len(rows) > LAGGING_ROWS else frozenset(doc_id for (doc_id,) in rows)


def rescored(
    conn: sqlite3.Connection,
    groups: list[IdGroup],
    terms: list[str],
    filters: SearchFilters,
) -> list[tuple[int, float]]:
    """``(doc_id, bm25)`` of the rows of the ``id_groups`` that match ``terms`` and pass
    ``filters``, scored by the bank's FTS5 table as a search of it would."""
    expression = fts5_match(terms)
    if expression is None:
        return []
    matched: list[tuple[int, float]] = []
    for sql, bounds in groups:
        matched += conn.execute(sql, (expression, *bounds)).fetchall()
    scores = {int(doc_id): float(score) for doc_id, score in matched}
    kept = passing_rows(conn, scores, filters)
    return [(doc_id, score) for doc_id, score in scores.items() if doc_id in kept]


def id_groups(ids: frozenset[int], table: str) -> list[IdGroup] | None:
    """Queries reading the ids from ``table`` cheaply, each with its parameters after the
    MATCH: the run of ids written last (new rows, close together) as a range, and up to
    ``SOUGHT_ONE_BY_ONE`` older ones scattered through the bank (retagged, say) each
    sought. ``None`` past that: a range over them all reads most of the bank's
    match, FTS5's whole search costs no more."""
    ordered = sorted(ids)
    start = len(ordered) - 1
    while start > 0 and ordered[start] - ordered[start - 1] <= _RUN_GAP:
        start -= 1
    run, scattered = ordered[start:], ordered[:start]
    if len(scattered) > SOUGHT_ONE_BY_ONE:
        return None
    groups: list[IdGroup] = []
    if run:
        groups.append((rescoring_sql(table), (run[0], run[-1], json.dumps(run))))
    if scattered:
        groups.append((seeking_sql(table), (json.dumps(scattered),)))
    return groups


def rescoring_sql(table: str) -> str:
    """bm25() of the rows of ``table`` matching a MATCH expression between two ids (the
    lowest and the highest of a group), among the group's ids as a JSON list.

    FTS5 reads the match between the two alone; the list filters what it reads. As a
    rowid constraint ("rowid IN") FTS5 runs the whole match once per id instead (123
    against 1.6 ms for 1,000 ids in a 200,000-row table): ``seeking_sql``, for a few.
    """
    return f"{_scored(table)} AND rowid BETWEEN ? AND ? AND +rowid IN {_JSON_IDS}"


def seeking_sql(table: str) -> str:
    """bm25() of the rows of ``table`` matching a MATCH expression among a few ids (a
    JSON list), each sought in the match: ~0.1 ms an id, whatever the bank's size."""
    return f"{_scored(table)} AND rowid IN {_JSON_IDS}"


_JSON_IDS = "(SELECT value FROM json_each(?))"


def _scored(table: str) -> str:
    """The rows of ``table`` a MATCH expression finds, with their bm25() as a search's."""
    return f"SELECT rowid, -bm25({table}, {BM25_WEIGHTS}) FROM {table} WHERE {table} MATCH ?"  # noqa: S608 - ours


def search_bank(
    searcher: tantivy.Searcher,
    query: tantivy.Query | None,
    conn: sqlite3.Connection,
    terms: list[str],
    filters: SearchFilters,
    size: int,
    *,
    behind_since: int | None = None,
) -> list[tuple[int, float]] | None:
    """The bank's best ``size`` rows for the OR of ``terms`` (``query`` in its index, None:
    no term it holds), best first; ``behind_since``: the ``seq`` the index holds the bank
    to, when SQLite holds later rows of it. ``None``: too many rows changed since for this
    search to answer (FTS5 answers)."""
    stale, groups = frozenset[int](), list[IdGroup]()
    if behind_since is not None:
        changed = changed_since(conn, filters.bank_id, behind_since)
        if changed is None:
            return None  # too many rows to read apart: FTS5 answers
        if changed:  # (none: signals or deletes alone, which the index answers for as it is)
            searched = searched_table(conn, filters.bank_id)
            if searched is None or not searched[1]:
                return None  # a shared FTS5 table's idf counts other banks: FTS5 answers
            found = id_groups(changed, searched[0])
            if found is None:
                return None
            stale, groups = changed, found
    if size == 0:
        return []
    ranked = [] if query is None else ranked_in(searcher, query, conn, filters, size, stale=stale)
    if groups:
        ranked += rescored(conn, groups, terms, filters)
        ranked = sorted(ranked, key=lambda hit: (-hit[1], hit[0]))[:size]
    return ranked
