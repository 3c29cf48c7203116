"""What a tantivy text search asks, and how its answer is checked against SQLite.

Pure of any store: the query for a bank's index (terms weighed to FTS5's idf, the
immutable filters), and the SQLite check every candidate passes (:mod:`.tantivy_text`).
"""

from __future__ import annotations

import json
import math
import sqlite3
from typing import Any

import tantivy

from cogsub.index.ports import SearchFilters
from cogsub.index.sqlite.columns import epoch_us
from cogsub.index.sqlite.reads import filter_sql

__all__ = [
    "FTS5_IDF_FLOOR",
    "DETAIL_BOOST",
    "TAGS_BOOST",
    "en_stem",
    "idf_to_fts5",
    "immutable_filters",
    "passing_rows",
    "text_query",
]

#: Weight of a tags match against a summary match (FTS5's bm25 column weight).
TAGS_BOOST = 0.5
#: Weight of a match in the text past the summary (FTS5's bm25 column weight).
DETAIL_BOOST = 1.0
_FIELDS = (("summary", 1.0), ("tags", TAGS_BOOST), ("detail", DETAIL_BOOST))
#: FTS5's bm25() floor for a term's idf (a term in half the documents or more).
FTS5_IDF_FLOOR = 1e-6


def en_stem() -> tantivy.TextAnalyzer:
    """tantivy's ``en_stem`` as an analyzer, so query terms become the indexed tokens."""
    builder = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
    builder = builder.filter(tantivy.Filter.remove_long(40)).filter(tantivy.Filter.lowercase())
    return builder.filter(tantivy.Filter.stemmer("english")).build()


def text_query(
    schema: tantivy.Schema,
    analyzer: tantivy.TextAnalyzer,
    searcher: tantivy.Searcher,
    terms: list[str],
    filters: SearchFilters,
) -> tantivy.Query | None:
    """The OR of the terms' tokens in summary, tags and detail, each weighed to FTS5's idf."""
    tokens = list(dict.fromkeys(t for term in terms for t in analyzer.analyze(term)))
    total = searcher.num_docs
    clauses = []
    for token in tokens:
        holdings = {name: searcher.doc_freq(name, token) for name, _ in _FIELDS}
        # FTS5's idf counts the rows holding a term in any column: at least the most any
        # one field holds (a name in every summary weighs nothing in a detail either).
        rows_holding = max(holdings.values())
        for name, weight in _FIELDS:
            if holding := holdings[name]:
                boost = weight * idf_to_fts5(total, holding, rows_holding)
                term = tantivy.Query.term_query(schema, name, token)
                clauses.append((tantivy.Occur.Should, tantivy.Query.boost_query(term, boost)))
    if not clauses:
        return None
    text = tantivy.Query.boolean_query(clauses)
    narrowing = immutable_filters(schema, filters)
    if not narrowing:
        return text
    must = tantivy.Occur.Must
    scoreless = [(must, tantivy.Query.const_score_query(q, 0.0)) for q in narrowing]
    return tantivy.Query.boolean_query([(must, text), *scoreless])


def idf_to_fts5(documents: int, holding: int, rows_holding: int | None = None) -> float:
    """The factor turning tantivy's idf of a term into FTS5's, the idf fusion was tuned on.

    tantivy's ``ln(1 + (N - n + 0.5) / (n + 0.5))`` (``n``: ``holding``, the documents
    holding the term in this field) stays well above zero for a term in most documents
    (a speaker's name in a conversation: ~0.4); FTS5's ``ln((N - m + 0.5) / (m + 0.5))``
    (``m``: ``rows_holding``, those holding it in any field; ``holding`` if not given),
    floored at 1e-6, gives such a term nothing, so a name in half the turns does not
    outweigh the rare word that answers.
    """
    rows_holding = holding if rows_holding is None else max(rows_holding, holding)
    documents = max(documents, rows_holding)
    odds = (documents - rows_holding + 0.5) / (rows_holding + 0.5)
    fts5 = max(math.log(odds), FTS5_IDF_FLOOR) if odds > 1.0 else FTS5_IDF_FLOOR
    return fts5 / math.log1p((documents - holding + 0.5) / (holding + 0.5))


def immutable_filters(schema: tantivy.Schema, filters: SearchFilters) -> list[tantivy.Query]:
    """The filters a row keeps for life, as tantivy narrows (SQLite checks all of them again)."""
    narrowing = []
    if filters.fact_types is not None:
        kinds = sorted(kind.value for kind in filters.fact_types)
        narrowing.append(tantivy.Query.term_set_query(schema, "fact_type", kinds))
    if filters.since is not None or filters.until is not None:
        since = None if filters.since is None else epoch_us(filters.since)
        until = None if filters.until is None else epoch_us(filters.until)
        narrowing.append(
            tantivy.Query.range_query(
                schema, "ts_us", tantivy.FieldType.Integer, since, until, True, until is None
            )
        )
    return narrowing


def passing_rows(
    conn: sqlite3.Connection, scored: dict[int, float], filters: SearchFilters
) -> set[int]:
    """Which candidates are rows of the snapshot that pass every filter."""
    if not scored:
        return set()
    clauses, params = filter_sql(filters)
    found: list[Any] = conn.execute(
        f"SELECT d.doc_id FROM documents AS d WHERE d.doc_id IN"  # noqa: S608 - clauses are ours
        f" (SELECT value FROM json_each(?)) AND {clauses}",
        (json.dumps(list(scored)), *params),
    ).fetchall()
    return {doc_id for (doc_id,) in found}
