"""Reads of stored documents: lookups, counts, scans, session neighbours, filters in SQL.

Each function runs on the connection it is given (a reader's, or the writer's
inside its transaction) and decodes rows with :mod:`.columns`.
"""

from __future__ import annotations

import json
import sqlite3
from bisect import bisect_left
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import Any

from cogsub.core.documents import IndexDocument
from cogsub.core.events import FactType
from cogsub.index.ports import Hit, SearchFilters, replay_order
from cogsub.index.sqlite.columns import document, epoch_us, timestamp_us
from cogsub.index.sqlite.window import Anchor, Span, SpanRow, around, spans, with_asked
from cogsub.sqlite_support import transaction

# Replay order, as the replay index keeps it, and the rows strictly after a cursor in it.
_DECAY = "json_extract(d.body, '$.decay_factor')"
_IN_REPLAY_ORDER = f"{_DECAY} DESC, d.importance_score DESC, d.event_id"
_AFTER_IN_REPLAY = (
    f"({_DECAY} < ? OR {_DECAY} = ?"
    " AND (d.importance_score < ? OR d.importance_score = ? AND d.event_id > ?))"
)
# No window: far enough to reach any timestamp, near enough to stay inside SQLite's 64 bits.
_MAX_REACH_US = 2**62
# Up to ``each_side`` turns of each anchor's session before it (side 0) and after it (1),
# within reach: one correlated LIMIT query per anchor and side, each on the session index
# (the window's way when its spans hold too many rows, see ``_IN_SPANS``).
_SIDE = (
    "SELECT anchor.n, {side}, near.ts_us, near.event_id, {{columns}} FROM anchor"
    " JOIN documents AS near ON near.doc_id IN ("
    " SELECT d.doc_id FROM documents AS d WHERE {{where}}"
    " AND json_extract(d.body, '$.session_id') = anchor.session_id"
    " AND (d.ts_us, d.event_id) {compare} (anchor.at_us, anchor.event_id)"
    " AND d.ts_us {bound} anchor.at_us {sign} ?"
    " ORDER BY d.ts_us {order}, d.event_id {order} LIMIT ?)"
)
_AROUND = (
    "WITH anchor (n, session_id, at_us, event_id) AS (SELECT json_extract(value, '$[0]'),"
    " json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]')"
    " FROM json_each(?)) "
    + _SIDE.format(side=0, compare="<", bound=">=", sign="-", order="DESC")
    + " UNION ALL "
    + _SIDE.format(side=1, compare=">", bound="<=", sign="+", order="ASC")
)
# The window reads ids first: anchors share neighbours, and a row read once per anchor
# carried its body and vector each time (most of the window's cost).
_AROUND_IDS = _AROUND.replace("{columns}", "near.doc_id")
# Every row of each span (one session's timestamps lo_us to hi_us, see :mod:`.window`), a
# range of the session index each, in one statement: a correlated LIMIT query per anchor
# and side (``_AROUND``) cost most of the window's time in seeks. Bounded per span: a span
# over a dense session would read it whole, and a span row costs about a quarter of a row
# found per anchor (0.65 against 2.6 us, on the LoCoMo banks), so a span holding more than
# ``_SPAN_ROWS_PER_TURN`` rows for each turn the most crowded span's anchors may return is
# asked per anchor (one bound for all: SQLite takes no OFFSET from a column).
# Past ``_SPAN_ROWS_ANYWAY`` rows of one span the read stops, and ``_COUNTED_SPANS``
# reads again, counting each span's rows before reading it.
# CROSS JOIN keeps the spans outside: the planner otherwise walked the bank per span list.
# Rows name their span by number: its session string, a column of the CTE, was extracted
# from the JSON again for every row (two thirds of the statement's time).
_SPAN = (
    " SELECT span.n, d.ts_us, d.event_id, d.doc_id FROM span CROSS"
    " JOIN documents AS d ON json_extract(d.body, '$.session_id') = span.session_id"
    " AND d.ts_us BETWEEN span.lo_us AND span.hi_us WHERE {where}"
)
_IN_SPANS = (
    "WITH span (n, session_id, lo_us, hi_us) AS (SELECT key, json_extract(value, '$[0]'),"
    " json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each(?))" + _SPAN
)
# The same, but a span holding more than a bound of rows (of its session, filters aside) is
# not read: it comes back as one row numbered -1 - n (sorting first). Counting walks the
# index only (OFFSET builds no row), a tenth of the cost of reading; first reading all spans
# saves even that when none is dense.
_COUNTED_SPANS = (
    "WITH span (n, session_id, lo_us, hi_us, dense) AS MATERIALIZED (SELECT key,"
    " json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),"
    " (SELECT 1 FROM documents AS s WHERE s.bank_id = ?"
    " AND json_extract(s.body, '$.session_id') = json_extract(value, '$[0]')"
    " AND s.ts_us BETWEEN json_extract(value, '$[1]') AND json_extract(value, '$[2]')"
    " LIMIT 1 OFFSET ?) FROM json_each(?))"
    " SELECT -1 - span.n, 0, '', 0 FROM span WHERE span.dense UNION ALL"
    + _SPAN.replace("WHERE {where}", "WHERE span.dense IS NULL AND {where}")
)
# Rows fetched between two looks at the span being read, after a first look as soon as
# one span could hold more than ``_SPAN_ROWS_ANYWAY`` rows: a dense session is seen early.
_FETCH = 256
_SPAN_ROWS_PER_TURN = 3
# A span of this many rows is read whole whatever its anchors: a second statement and the
# count cost more (without this floor, 1 LoCoMo call in 5 counted a ~22-turn session).
_SPAN_ROWS_ANYWAY = 64
# Listed ids of one bank, found through the (bank_id, event_id) identity index.
BY_IDS_IN_BANK = "bank_id = ? AND event_id IN (SELECT value FROM json_each(?))"


def get(conn: sqlite3.Connection, bank_id: str, event_id: str) -> IndexDocument | None:
    found = conn.execute(
        "SELECT body, embedding FROM documents WHERE event_id = ? AND bank_id = ?",
        (event_id, bank_id),
    ).fetchone()
    return None if found is None else document(*found)


def present(conn: sqlite3.Connection, bank_id: str, event_ids: list[str]) -> set[str]:
    rows = conn.execute(
        f"SELECT event_id FROM documents WHERE {BY_IDS_IN_BANK}",
        (bank_id, json.dumps(event_ids)),
    ).fetchall()
    return {event_id for (event_id,) in rows}


def count(conn: sqlite3.Connection, bank_id: str | None) -> int:
    if bank_id is None:
        (total,) = conn.execute("SELECT count(*) FROM documents").fetchone()
    else:
        (total,) = conn.execute(
            "SELECT count(*) FROM documents WHERE bank_id = ?", (bank_id,)
        ).fetchone()
    return int(total)


def neighbours(
    conn: sqlite3.Connection,
    filters: SearchFilters,
    anchors: Sequence[IndexDocument],
    each_side: int,
    window_us: int | None,
    skip: set[str],
) -> list[IndexDocument]:
    found = neighbour_rows(conn, filters, anchors, each_side, window_us, skip)
    return [document(body, blob) for _, body, blob in found]


def neighbour_rows(
    conn: sqlite3.Connection,
    filters: SearchFilters,
    anchors: Sequence[IndexDocument],
    each_side: int,
    window_us: int | None,
    skip: set[str],
) -> list[tuple[str, str, bytes]]:
    """(event_id, body, embedding) around each anchor, nearest first per side, each once.

    The rows' places first (:func:`_in_spans`), then the bodies of those chosen only,
    both in one snapshot: a row read once per anchor carried its body each time.
    """
    with _snapshot(conn):
        chosen = _in_spans(conn, filters, anchors, each_side, window_us, skip)
        rows = conn.execute(
            "SELECT doc_id, body, embedding FROM documents"
            " WHERE doc_id IN (SELECT value FROM json_each(?))",
            (json.dumps([row[3] for row in chosen]),),
        ).fetchall()
    bodies = {doc_id: (body, blob) for doc_id, body, blob in rows}
    return [(row[2], *bodies[row[3]]) for row in chosen]


def neighbour_doc_ids(
    conn: sqlite3.Connection,
    filters: SearchFilters,
    anchors: Sequence[IndexDocument],
    each_side: int,
    window_us: int | None,
    skip: set[str],
) -> list[int]:
    """The ``doc_id`` of each row :func:`neighbour_rows` would return, in its order."""
    return [row[3] for row in _in_spans(conn, filters, anchors, each_side, window_us, skip)]


def _in_spans(
    conn: sqlite3.Connection,
    filters: SearchFilters,
    anchors: Sequence[IndexDocument],
    each_side: int,
    window_us: int | None,
    skip: set[str],
) -> list[SpanRow[int]]:
    """The window's rows (``doc_id`` each): spans read whole, dense ones asked per anchor.

    ``each_side`` is not negative (the facade refuses it; in SQL it would mean no LIMIT).
    """
    placed = [
        Anchor(a.session_id, timestamp_us(a.timestamp), a.event_id)
        for a in anchors
        if a.session_id is not None
    ]
    if not placed or each_side == 0:
        return []
    reach = _MAX_REACH_US if window_us is None else window_us
    found, span_of = spans(placed, reach)
    rows, dense = _read_spans(conn, filters, found, span_of, each_side)
    if dense:
        asked = [n for n, span in enumerate(span_of) if span in dense]
        nearest = _per_anchor(conn, filters, placed, asked, each_side, reach)
        rows = with_asked(rows, span_of, nearest)
    return around(placed, span_of, rows, each_side, reach, skip)


def _read_spans(
    conn: sqlite3.Connection,
    filters: SearchFilters,
    found: Sequence[Span],
    span_of: Sequence[int],
    each_side: int,
) -> tuple[list[SpanRow[int]], set[int]]:
    """The rows of the spans read whole, and the numbers of the spans too dense to read."""
    listed = json.dumps([[span.session_id, span.lo_us, span.hi_us] for span in found])
    where, params = filter_sql(filters)
    cursor = conn.execute(_IN_SPANS.format(where=where), (listed, *params))
    rows: list[SpanRow[int]] = []
    try:
        while batch := cursor.fetchmany(_FETCH if rows else _SPAN_ROWS_ANYWAY + 1):
            rows += batch
            span = rows[-1][0]
            # Rows come span after span in index order: the last span's rows end the list.
            # Were they not, this count would only be wrong about cost, never about rows.
            if len(rows) - bisect_left(rows, (span,)) > _SPAN_ROWS_ANYWAY:
                per_anchor = _SPAN_ROWS_PER_TURN * 2 * each_side
                most = max(map(span_of.count, range(len(found)))) * per_anchor
                return _counted_spans(conn, filters, listed, max(most, _SPAN_ROWS_ANYWAY))
    finally:
        cursor.close()
    rows.sort()  # read span after span in index order already: one pass, no premise
    return rows, set()


def _counted_spans(
    conn: sqlite3.Connection, filters: SearchFilters, listed: str, bound: int
) -> tuple[list[SpanRow[int]], set[int]]:
    """As :func:`_read_spans`, a span being dense when it holds over ``bound`` rows."""
    where, params = filter_sql(filters)
    rows: list[SpanRow[int]] = conn.execute(
        _COUNTED_SPANS.format(where=where), (filters.bank_id, bound, listed, *params)
    ).fetchall()
    rows.sort()
    over = bisect_left(rows, (0,))  # the dense spans' rows, numbered below 0
    return rows[over:], {-1 - row[0] for row in rows[:over]}


def _per_anchor(
    conn: sqlite3.Connection,
    filters: SearchFilters,
    placed: Sequence[Anchor],
    asked: Sequence[int],
    each_side: int,
    reach_us: int,
) -> list[tuple[int, int, int, str, int]]:
    """(anchor number, side, ts_us, event_id, doc_id) of the asked anchors' turns."""
    where, params = filter_sql(filters)
    listed = [[n, placed[n].session_id, placed[n].at_us, placed[n].event_id] for n in asked]
    return conn.execute(
        _AROUND_IDS.format(where=where),
        (json.dumps(listed), *params, reach_us, each_side, *params, reach_us, each_side),
    ).fetchall()


def _snapshot(conn: sqlite3.Connection) -> AbstractContextManager[None]:
    """A read transaction, unless ``conn`` is in one already (the writer's, in memory)."""
    return nullcontext() if conn.in_transaction else transaction(conn, write=False)


def scan(
    conn: sqlite3.Connection, filters: SearchFilters, size: int, after: str | None
) -> list[IndexDocument]:
    where, params = filter_sql(filters)
    if after is not None:
        where += " AND d.event_id > ?"
        params.append(after)
    rows = conn.execute(
        f"SELECT d.body, d.embedding FROM documents AS d WHERE {where}"  # noqa: S608 - clauses are ours
        " ORDER BY d.event_id LIMIT ?",
        (*params, size),
    ).fetchall()
    return [document(body, blob) for body, blob in rows]


def scan_in_replay_order(
    conn: sqlite3.Connection, filters: SearchFilters, size: int, after: IndexDocument | None
) -> list[IndexDocument]:
    # The index orders each fact type apart: the first ``size`` of each type (keys
    # only, from the index), merged, are the first ``size`` of the union.
    lanes: list[FactType | None] = [*FactType, None]
    if filters.fact_types is not None:
        lanes = [*sorted(filters.fact_types)]
    where, params = filter_sql(replace(filters, fact_types=None))
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
    return sorted((document(body, blob) for body, blob in rows), key=replay_order)


def hits(
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
            hits.append(Hit(document(row[1], row[2]), float(score)))
    return hits


def filter_sql(filters: SearchFilters) -> tuple[str, list[Any]]:
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
        params.append(epoch_us(filters.since))
    if filters.until is not None:
        clauses.append("d.ts_us < ?")
        params.append(epoch_us(filters.until))
    if filters.min_importance is not None:
        clauses.append("d.importance_score >= ?")
        params.append(filters.min_importance)
    return " AND ".join(clauses), params
