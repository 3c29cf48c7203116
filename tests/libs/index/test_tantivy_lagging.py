"""Searches of a bank whose tantivy index lags SQLite: the index answers for the rows it
holds, FTS5 scores those written since, and the two are merged (``tantivy_search``)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from cogsub.core.events import FactType
from cogsub.index.ports import DocumentPatch, SearchFilters
from cogsub.index.sqlite import tantivy_search, text
from cogsub.index.sqlite.tantivy_search import rescoring_sql
from cogsub.index.sqlite.text import TEXT_COLUMNS
from tests.contract.index_contract import make_doc
from tests.libs.index.tantivy_store import calls_of, seqs
from tests.libs.index.test_tantivy_text import found, opened


@pytest.fixture
def path(data_dir: Path) -> Path:
    return data_dir / "index.sqlite3"


async def test_a_row_rewritten_since_is_found_by_its_new_words_only(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = opened(path, catch_up_s=60)  # the first write catches up, the next ones owe it
    try:
        await index.upsert([make_doc(unique_name, "a", summary="amber lantern")])
        await index.upsert([make_doc(unique_name, "a", summary="cobalt kiln")])
        answered = calls_of(monkeypatch, "rank", searches=True)
        assert await found(index, unique_name, "lantern") == []
        assert await found(index, unique_name, "kiln") == [f"{unique_name}-a"]
        assert len(answered) == 2 and None not in answered  # tantivy's, not FTS5's alone
    finally:
        await index.close()


async def test_rows_written_since_take_their_place_by_score_and_pass_the_filters(
    path: Path, unique_name: str
) -> None:
    index = opened(path, catch_up_s=60)
    try:
        old = [make_doc(unique_name, f"o{i}", summary=f"amber note {i}") for i in range(5)]
        await index.upsert(old)
        both = make_doc(unique_name, "both", summary="amber kiln", fact_type=FactType.WORLD)
        other = make_doc(unique_name, "other", summary="amber kiln", fact_type=FactType.EXPERIENCE)
        await index.upsert([both, other])
        bank = SearchFilters(bank_id=unique_name)
        hits = await index.search_text("amber kiln", bank, size=3)
        assert {hit.document.event_id for hit in hits[:2]} == {both.event_id, other.event_id}
        assert hits[1].score > hits[2].score  # both words above one
        worlds = SearchFilters(bank_id=unique_name, fact_types=frozenset({FactType.WORLD}))
        hits = await index.search_text("kiln", worlds, size=5)
        assert [hit.document.event_id for hit in hits] == [both.event_id]
    finally:
        await index.close()


async def test_past_the_lagging_rows_fts5_answers_the_whole_search(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tantivy_search, "LAGGING_ROWS", 2)
    index = opened(path, catch_up_s=60)
    try:
        await index.upsert([make_doc(unique_name, "a", summary="amber")])
        answered = calls_of(monkeypatch, "rank", searches=True)
        await index.upsert([make_doc(unique_name, f"n{i}", summary="amber") for i in range(2)])
        assert len(await found(index, unique_name, "amber")) == 3
        await index.upsert([make_doc(unique_name, "n2", summary="amber")])
        assert len(await found(index, unique_name, "amber")) == 4
        assert answered[0] is not None and answered[1] is None
    finally:
        await index.close()


def test_the_rows_written_since_filter_the_match_instead_of_seeking_each_id() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE text_0 USING fts5({TEXT_COLUMNS})")
    plan = " ".join(
        row[-1]
        for row in conn.execute(
            f"EXPLAIN QUERY PLAN {rescoring_sql('text_0')}", ('"a"', 1, 1, "[1]")
        )
    )
    assert "VIRTUAL TABLE INDEX 0:M3><" in plan, plan  # the match in a range, no rowid equality


async def test_a_snapshot_older_than_the_store_is_answered_by_fts5(
    path: Path, unique_name: str
) -> None:
    """A reader whose snapshot began before a catch-up must not see the rows it applied."""
    index = opened(path, catch_up_s=0)
    filters = SearchFilters(bank_id=unique_name)
    try:
        await index.upsert([make_doc(unique_name, "y", summary="amber lantern")])
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT seq FROM index_state").fetchone()  # the snapshot starts here
        await index.upsert([make_doc(unique_name, "y", summary="cobalt kiln")])  # caught up
        engine = index._text  # the tantivy store the index searches through
        assert engine is not None
        assert engine.rank(reader, ["kiln"], filters, 10) is None
        assert [doc_id for doc_id, _ in text.rank_text(reader, ["lantern"], filters, 10)] != []
        assert text.rank_text(reader, ["kiln"], filters, 10) == []  # FTS5, in the snapshot
        reader.execute("COMMIT")
        reader.close()
    finally:
        await index.close()


def test_ids_are_read_as_the_run_written_last_and_a_few_sought() -> None:
    new = list(range(1_000_000, 1_000_040, 3))
    assert tantivy_search.id_groups(frozenset(new), "text_0") == [
        (tantivy_search.rescoring_sql("text_0"), (new[0], new[-1], json.dumps(new)))
    ]
    scattered = [5, 9_000]
    run, sought = tantivy_search.id_groups(frozenset(scattered + new), "text_0") or []
    assert run[1][:2] == (new[0], new[-1])
    assert sought == (tantivy_search.seeking_sql("text_0"), (json.dumps(scattered),))
    many = list(range(0, 5_000 * (tantivy_search.SOUGHT_ONE_BY_ONE + 1), 5_000))  # far apart
    assert tantivy_search.id_groups(frozenset(many + new), "text_0") is None  # FTS5's


async def test_a_bank_sharing_its_fts5_table_is_fts5s_while_its_index_lags(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shared table's bm25() counts other banks' rows: its scores are no match for tantivy's."""
    monkeypatch.setattr(text, "TEXT_TABLES", 1)
    index = opened(path, catch_up_s=60)
    try:
        banks = [unique_name, f"{unique_name}-other"]
        await index.upsert([make_doc(bank, "a", summary="amber") for bank in banks])
        answered = calls_of(monkeypatch, "rank", searches=True)
        await index.update(banks[0], f"{banks[0]}-a", DocumentPatch(retrieval_count=2))
        assert await found(index, banks[0], "amber") == [f"{banks[0]}-a"]  # signals alone
        await index.upsert([make_doc(banks[0], "b", summary="amber kiln")])
        assert await found(index, banks[0], "amber") == [f"{banks[0]}-a", f"{banks[0]}-b"]
        assert answered[0] is not None and answered[1] is None
    finally:
        await index.close()


async def test_a_row_whose_signals_changed_since_keeps_its_text(
    path: Path, unique_name: str
) -> None:
    index = opened(path, catch_up_s=60)
    try:
        await index.upsert([make_doc(unique_name, f"r{i}", summary=f"amber {i}") for i in range(4)])
        await index.upsert([make_doc(unique_name, "new", summary="amber kiln")])  # owes it
        await index.update(unique_name, f"{unique_name}-r1", DocumentPatch(retrieval_count=5))
        assert len(await found(index, unique_name, "amber")) == 5
        assert await found(index, unique_name, "kiln") == [f"{unique_name}-new"]
        # Its signals alone changed: the index holds its text as it is, so it is not re-read.
        assert _changed(path, unique_name) == {f"{unique_name}-new"}
        await index.update(unique_name, f"{unique_name}-r2", DocumentPatch(add_tags=("kiln",)))
        assert _changed(path, unique_name) == {f"{unique_name}-new", f"{unique_name}-r2"}
        assert await found(index, unique_name, "kiln") == [
            f"{unique_name}-new",
            f"{unique_name}-r2",
        ]
    finally:
        await index.close()


def _changed(path: Path, bank: str) -> set[str]:
    """The event ids of the rows a lagging search of ``bank`` reads from FTS5."""
    _, store_seq = seqs(path)
    with sqlite3.connect(path) as conn:
        changed = tantivy_search.changed_since(conn, bank, store_seq) or frozenset()
        found = conn.execute(
            "SELECT event_id FROM documents WHERE doc_id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(changed)),),
        ).fetchall()
    conn.close()
    return {event_id for (event_id,) in found}
