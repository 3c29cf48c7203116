"""Text search: FTS5 tables per bank, and BM25 ranking answered in stages.

``text_N`` holds ``summary``, ``tags`` and ``detail`` (the text past the summary, up to
``DETAIL_LENGTH`` characters) of its banks' rows (porter stemming,
unicode61, diacritics removed), written in the same transaction as the row; a
table per bank (``text_tables`` says which), shared in turn past ``TEXT_TABLES``
banks. Text search ORs the quoted query terms (:mod:`cogsub.index.text_query`)
and ranks by FTS5's ``bm25()`` over the bank's table, negated so that higher is
better; a search reads no other bank's postings. Because bm25() costs about a
microsecond per matching row, a query whose terms match many rows is answered in
stages, rarest term first, stopping as soon as a score bound proves the rows not
reached yet cannot enter the top k (``fts5_stages``); the answer is the full OR's,
usually for a fraction of the work.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from cogsub.index.ports import Hit, SearchFilters
from cogsub.index.sqlite.reads import filter_sql, hits
from cogsub.index.text_query import (
    fts5_match,
    fts5_stages,
    fts5_staging_pays,
    fts5_weighty_terms,
    quote_fts5,
)
from cogsub.sqlite_support import transaction

#: BM25 column weights (summary, tags, detail): tags are short, so full weight would let them
#: dominate; the text past the summary weighs as the summary does.
BM25_WEIGHTS = "1.0, 0.5, 1.0"
TEXT_COLUMNS = "summary, tags, detail, tokenize = 'porter unicode61 remove_diacritics 2'"
#: FTS5 tables for text: one per bank up to this many banks, which later banks then share
#: (each table is six in the schema, which every connection parses when it opens).
TEXT_TABLES = 64
#: Matching rows (bm25() costs ~1 us each) above which a query is answered in stages.
STAGE_BUDGET = 5_000


def search_text(
    conn: sqlite3.Connection, terms: list[str], filters: SearchFilters, size: int
) -> list[Hit]:
    """The best ``size`` documents for the OR of ``terms``, read in one snapshot."""
    with transaction(conn, write=False):
        return hits(conn, rank_text(conn, terms, filters, size), bank_id=filters.bank_id)


def text_table(conn: sqlite3.Connection, bank_id: str) -> str | None:
    """The FTS5 table holding ``bank_id``'s rows; ``None`` if the bank never had any."""
    found = conn.execute(
        "SELECT text_table FROM text_tables WHERE bank_id = ?", (bank_id,)
    ).fetchone()
    return None if found is None else f"text_{found[0]}"


def searched_table(conn: sqlite3.Connection, bank_id: str) -> tuple[str, bool] | None:
    """``text_table`` and whether the bank is alone in it, in one lookup."""
    found = conn.execute(
        "SELECT t.text_table, (SELECT count(*) FROM (SELECT 1 FROM text_tables AS o"
        " WHERE o.text_table = t.text_table LIMIT 2)) FROM text_tables AS t WHERE t.bank_id = ?",
        (bank_id,),
    ).fetchone()
    return None if found is None else (f"text_{found[0]}", found[1] == 1)


def text_table_to_write(conn: sqlite3.Connection, bank_id: str) -> str:
    """``text_table``, given to a new bank inside the caller's write transaction.

    Each bank has a table of its own until ``TEXT_TABLES`` banks exist; later
    banks share them in turn. A search reads and scores only its table's rows,
    so its cost follows its bank's size instead of the whole index's, and
    BM25's document frequencies are its bank's own (its table's, when shared).
    """
    table = text_table(conn, bank_id)
    if table is not None:
        return table
    (banks,) = conn.execute("SELECT count(*) FROM text_tables").fetchone()
    number = banks % TEXT_TABLES
    conn.execute("INSERT INTO text_tables (bank_id, text_table) VALUES (?, ?)", (bank_id, number))
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS text_{number} USING fts5({TEXT_COLUMNS})")
    return f"text_{number}"


def purge_text(conn: sqlite3.Connection, table: str) -> None:
    """Drop deleted rows' terms from an FTS table itself, not only from its content.

    An FTS5 delete only appends a "delete" entry: the row's terms stay in the
    older segments until a merge reaches them, and SQLite before 3.42 has no
    ``secure-delete`` option. ``optimize`` merges every segment into one,
    leaving the deleted terms out; with ``secure_delete`` the pages it frees
    are zeroed. It rewrites the bank's table (~0.2 s at 110k documents), a
    price paid per forget, never per ingested batch.
    """
    conn.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")


def insert_text(table: str) -> str:
    return f"INSERT INTO {table} (rowid, summary, tags, detail) VALUES (?, ?, ?, ?)"


def delete_text(conn: sqlite3.Connection, table: str, doc_ids: Sequence[int]) -> None:
    """Delete rows' entries from ``table``."""
    conn.execute(
        f"DELETE FROM {table} WHERE rowid IN (SELECT value FROM json_each(?))",
        (json.dumps(list(doc_ids)),),
    )


def rank_text(
    conn: sqlite3.Connection, terms: list[str], filters: SearchFilters, size: int
) -> list[tuple[int, float]]:
    """``(doc_id, bm25)`` of the best ``size`` rows for the OR of ``terms``, best first.

    A connection carrying a text engine (``IndexConnection.text_engine``) asks it instead;
    when the engine cannot answer for the snapshot (its bank has no index there, too many
    of its rows are newer than the engine's, or the engine holds commits newer than the
    snapshot), the FTS5 tables, written in the rows' own transaction, answer.
    """
    engine = getattr(conn, "text_engine", None)
    if engine is not None:
        answered: list[tuple[int, float]] | None = engine.rank(conn, terms, filters, size)
        if answered is not None:
            return answered
    searched = searched_table(conn, filters.bank_id)
    if searched is None:
        return []
    table, alone = searched
    sql, params = ranking_sql(table, filters, alone=alone)

    def ranked(expression: str) -> list[tuple[int, float]]:
        return conn.execute(sql, (expression, *params, size)).fetchall()

    # The table's own row count, the N of its bm25(): one small row a document. A table
    # too small for its terms to match ``STAGE_BUDGET`` rows in all is asked in one query,
    # as the frequencies would decide, without counting each term's rows first.
    if len(terms) > 1 and (total := _rows_in(conn, table)) * len(terms) > STAGE_BUDGET:
        doc_freqs = [
            conn.execute(
                f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (quote_fts5(term),)
            ).fetchone()[0]
            for term in terms
        ]
        terms, doc_freqs = fts5_weighty_terms(terms, doc_freqs, total, budget=STAGE_BUDGET)
        stages = (
            fts5_stages(terms, doc_freqs, total, budget=STAGE_BUDGET)
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


def _rows_in(conn: sqlite3.Connection, table: str) -> int:
    (total,) = conn.execute(f"SELECT count(*) FROM {table}_docsize").fetchone()
    return int(total)


def ranking_sql(table: str, filters: SearchFilters, *, alone: bool) -> tuple[str, list[Any]]:
    """The query ranking ``table``'s rows for ``filters``: MATCH, then filter params, then LIMIT.

    ``alone``: the filtered bank is the only one in ``table``.
    """
    if alone and filters == SearchFilters(filters.bank_id):
        # The table is the bank: no join to filter by (it was half of a query's time).
        sql = (
            f"SELECT rowid, -bm25({table}, {BM25_WEIGHTS}) AS score FROM {table}"
            f" WHERE {table} MATCH ? ORDER BY score DESC, rowid LIMIT ?"
        )
        return sql, []
    clauses, params = filter_sql(filters)
    # CROSS JOIN keeps FTS the outer loop; filters run before bm25() is computed.
    sql = (
        f"SELECT d.doc_id, -bm25({table}, {BM25_WEIGHTS}) AS score FROM {table}"
        f" CROSS JOIN documents AS d INDEXED BY documents_filter ON d.doc_id = {table}.rowid"
        f" WHERE {table} MATCH ? AND {clauses} ORDER BY score DESC, d.doc_id LIMIT ?"
    )
    return sql, params
