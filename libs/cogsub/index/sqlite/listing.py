"""Browsing the embedded index: newest-first keyset pages of a bank, and bank summaries.

Each function runs on the reader connection it is given. A page seeks into the
``documents_newest_first`` index at its cursor and reads backwards, so its cost
is the page, not the bank; the cursor is a (timestamp, event_id) key, which
writes and deletes elsewhere in the bank cannot move.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence
from dataclasses import replace

from cogsub.core.derived import SUPERSEDED_BY_TAG
from cogsub.core.documents import IndexDocument
from cogsub.core.events import FactType
from cogsub.core.listing import ListingKey
from cogsub.core.memory import PROCEDURE_TAG_PREFIX
from cogsub.index.ports import (
    BankCounts,
    SearchFilters,
    is_newest_version,
    newest_versions,
    procedure_of,
)
from cogsub.index.sqlite.columns import timestamp_us
from cogsub.index.sqlite.reads import filter_sql

# Tags compared by prefix with substr, not LIKE: LIKE folds case and a tag is exact.
_LIVE = (
    "NOT EXISTS (SELECT 1 FROM json_each(d.tags) AS tag"
    f" WHERE substr(tag.value, 1, {len(SUPERSEDED_BY_TAG)}) = '{SUPERSEDED_BY_TAG}')"
)
# A row value, not ``ts < ? OR ts = ? AND id < ?``: SQLite seeks the index to a row value
# and would scan from the bank's newest to the cursor for the OR (7 ms against 0.05 ms
# 5,000 memories deep).
_AFTER = "(d.ts_us, d.event_id) < (?, ?)"
_NEWEST_FIRST = "d.ts_us DESC, d.event_id DESC"
_BY_TYPE = ("documents_newest_by_type", " AND d.fact_type = ?")


def newest_page(
    conn: sqlite3.Connection,
    filters: SearchFilters,
    size: int,
    after: ListingKey | None,
    include_superseded: bool,
) -> list[IndexDocument]:
    """A page newest first; unless ``include_superseded``, without the superseded and
    without a procedure version older than another of the bank (as recall leaves them out).

    A version's successor carries no tag on the old one, so older versions are dropped
    after the read and the page topped up from past its last row.
    """
    kept: list[IndexDocument] = []
    newest: dict[str, int] = {}  # looked up once per procedure for the whole call
    wanted, cursor = size, after
    while True:
        page = _rows_after(conn, filters, wanted, cursor, include_superseded)
        if include_superseded:
            return page
        newest.update(_newest_versions(conn, filters.bank_id, page, known=newest))
        kept += [doc for doc in page if is_newest_version(doc, newest)]
        if len(page) < wanted or len(kept) >= size:
            return kept
        wanted, cursor = size - len(kept), ListingKey(page[-1].timestamp, page[-1].event_id)


def _newest_versions(
    conn: sqlite3.Connection,
    bank_id: str,
    docs: Sequence[IndexDocument],
    *,
    known: Collection[str],
) -> dict[str, int]:
    """The newest version in the bank of each procedure ``docs`` hold a version of.

    Versions are procedures: only the bank's procedures are read, from the by-type index.
    """
    wanted = {found[0] for doc in docs if (found := procedure_of(doc.tags)) is not None}
    wanted -= set(known)
    if not wanted:
        return {}
    tags = sorted(f"{PROCEDURE_TAG_PREFIX}{pid}" for pid in wanted)
    rows = conn.execute(
        "SELECT d.tags FROM documents AS d INDEXED BY documents_newest_by_type"
        " WHERE d.bank_id = ? AND d.fact_type = ? AND EXISTS (SELECT 1 FROM json_each(d.tags)"
        " AS tag WHERE tag.value IN (SELECT value FROM json_each(?)))",
        (bank_id, FactType.PROCEDURE.value, json.dumps(tags)),
    )
    return newest_versions((json.loads(tags) for (tags,) in rows), wanted)


def _rows_after(
    conn: sqlite3.Connection,
    filters: SearchFilters,
    size: int,
    after: ListingKey | None,
    include_superseded: bool,
) -> list[IndexDocument]:
    # One lane per asked type, each read from the by-type index and merged here: a
    # single walk of the bank skipping other types read ~4 rows per one kept.
    lanes: list[FactType | None] = [None]
    if filters.fact_types is not None:
        lanes = [*sorted(filters.fact_types)]
    where, params = filter_sql(replace(filters, fact_types=None))
    if after is not None:
        at_us = timestamp_us(after.timestamp)
        where += f" AND {_AFTER}"
        params += [at_us, after.event_id]
    if not include_superseded:
        where += f" AND {_LIVE}"
    found: list[tuple[int, str, str]] = []
    for lane in lanes:
        index, typed = ("documents_newest_first", "") if lane is None else _BY_TYPE
        found += conn.execute(
            f"SELECT d.ts_us, d.event_id, d.body FROM documents AS d INDEXED BY {index}"  # noqa: S608 - clauses are ours
            f" WHERE {where}{typed} ORDER BY {_NEWEST_FIRST} LIMIT ?",
            (*params, *([] if lane is None else [lane.value]), size),
        ).fetchall()
    found.sort(key=lambda row: (row[0], row[1]), reverse=True)
    return [_without_embedding(body) for _, _, body in found[:size]]


def bank_counts(
    conn: sqlite3.Connection, bank_ids: Collection[str] | None, size: int, after: str | None
) -> list[BankCounts]:
    summaries = []
    for bank_id in _banks_after(conn, bank_ids, size, after):
        summaries.append(_summary(conn, bank_id))
    return summaries


def _banks_after(
    conn: sqlite3.Connection, bank_ids: Collection[str] | None, size: int, after: str | None
) -> list[str]:
    """Banks holding documents, in id order after ``after``: one index seek per bank.

    A ``SELECT DISTINCT`` would read every row of every bank passed over.
    """
    if bank_ids is not None:
        wanted = sorted(b for b in set(bank_ids) if after is None or b > after)
        held = conn.execute(
            "SELECT value FROM json_each(?) AS b"
            " WHERE EXISTS (SELECT 1 FROM documents WHERE bank_id = b.value)",
            (json.dumps(wanted),),
        ).fetchall()
        return sorted(bank for (bank,) in held)[:size]
    found: list[str] = []
    cursor = after
    while len(found) < size:
        (bank,) = conn.execute(
            "SELECT min(bank_id) FROM documents WHERE bank_id > ?", (cursor or "",)
        ).fetchone()
        if bank is None:
            break
        found.append(bank)
        cursor = bank
    return found


def _summary(conn: sqlite3.Connection, bank_id: str) -> BankCounts:
    rows = conn.execute(
        "SELECT fact_type, count(*) FROM documents WHERE bank_id = ? GROUP BY fact_type",
        (bank_id,),
    ).fetchall()
    newest = conn.execute(
        "SELECT json_extract(d.body, '$.timestamp') FROM documents AS d"
        f" INDEXED BY documents_newest_first WHERE d.bank_id = ? ORDER BY {_NEWEST_FIRST} LIMIT 1",
        (bank_id,),
    ).fetchone()
    counts = {None if fact is None else FactType(fact): int(n) for fact, n in rows}
    return BankCounts(bank_id, counts, None if newest is None else str(newest[0]))


def _without_embedding(body: str) -> IndexDocument:
    data = json.loads(body)
    data["embedding"] = []
    return IndexDocument.model_validate(data)
