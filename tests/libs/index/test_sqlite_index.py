"""SqliteMemoryIndex behaviour beyond the contract: errors, schema, cache, pruning."""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cogsub.core import (
    ConfigurationError,
    FactType,
    IndexDocument,
    InvalidInputError,
    UnavailableError,
)
from cogsub.index.ports import DocumentPatch, Hit, SearchFilters
from cogsub.index.sqlite import SqliteMemoryIndex, connections, schema, text, vectors
from cogsub.index.text_query import Fts5Stage, fts5_stages, fts5_weighty_terms
from tests.contract.index_contract import BASE_TIME, angled_vector, axis, make_doc, unit_vector

DIMENSION = 8


@pytest.fixture
def path(data_dir: Path) -> Path:
    return data_dir / "index.sqlite3"


@pytest.fixture(params=["fts5", "tantivy"])
async def index(path: Path, request: pytest.FixtureRequest) -> AsyncIterator[SqliteMemoryIndex]:
    index = SqliteMemoryIndex(path, text_engine=request.param, large_bank=0, text_catch_up_s=0)
    await index.ensure(dimension=DIMENSION)
    yield index
    await index.close()


@pytest.fixture
async def fts5_index(path: Path) -> AsyncIterator[SqliteMemoryIndex]:
    """For FTS5's own ranking (its stages and budget): no other engine has them."""
    index = SqliteMemoryIndex(path, text_engine="fts5")
    await index.ensure(dimension=DIMENSION)
    yield index
    await index.close()


def doc(bank: str, name: str, **fields: object) -> IndexDocument:
    return make_doc(bank, name, dimension=DIMENSION, **fields)  # type: ignore[arg-type]


def checked_text_rows(conn: sqlite3.Connection) -> int:
    """Rows in all the FTS tables, once FTS5 has checked each one's index against its content."""
    total = 0
    for (number,) in conn.execute("SELECT DISTINCT text_table FROM text_tables").fetchall():
        conn.execute(f"INSERT INTO text_{number} (text_{number}) VALUES ('integrity-check')")
        total += conn.execute(f"SELECT count(*) FROM text_{number}").fetchone()[0]
    return total


async def test_vector_scores_are_cosines(index: SqliteMemoryIndex, unique_name: str) -> None:
    await index.upsert(
        [
            doc(unique_name, "a", embedding=[2.0 * v for v in angled_vector(0.6, DIMENSION)]),
            doc(unique_name, "b", embedding=angled_vector(-0.25, DIMENSION)),
        ]
    )
    hits = await index.search_vector(axis(DIMENSION), SearchFilters(bank_id=unique_name), size=5)
    assert [hit.score for hit in hits] == pytest.approx([0.6, -0.25], abs=1e-6)


async def test_naive_datetimes_in_filters_are_utc(
    index: SqliteMemoryIndex, unique_name: str
) -> None:
    await index.upsert([doc(unique_name, "t", summary="kiwi", timestamp=BASE_TIME)])
    naive = BASE_TIME.replace(tzinfo=None)
    at = SearchFilters(bank_id=unique_name, since=naive, until=naive + timedelta(milliseconds=1))
    assert len(await index.search_text("kiwi", at, size=5)) == 1
    after = SearchFilters(bank_id=unique_name, since=naive + timedelta(microseconds=1))
    assert await index.search_text("kiwi", after, size=5) == []


async def test_bad_documents_are_invalid_input_and_write_nothing(
    index: SqliteMemoryIndex, unique_name: str
) -> None:
    good = doc(unique_name, "good")
    bad_time = doc(unique_name, "time", timestamp=BASE_TIME).model_copy(
        update={"timestamp": "yesterday"}
    )
    not_finite = doc(unique_name, "nan", embedding=[float("nan")] + [0.0] * (DIMENSION - 1))
    for bad in (bad_time, not_finite):
        with pytest.raises(InvalidInputError):
            await index.upsert([good, bad])
    assert await index.count(unique_name) == 0


async def test_bad_search_arguments_are_invalid_input(
    index: SqliteMemoryIndex, unique_name: str
) -> None:
    filters = SearchFilters(bank_id=unique_name)
    with pytest.raises(InvalidInputError):
        await index.search_text("x", filters, size=-1)
    with pytest.raises(InvalidInputError):
        await index.search_vector([float("inf")] * DIMENSION, filters, size=3)
    with pytest.raises(InvalidInputError):
        await index.search_vector([[1.0]], filters, size=3)  # type: ignore[list-item]


async def test_a_patch_out_of_range_is_invalid_and_changes_nothing(
    index: SqliteMemoryIndex, unique_name: str
) -> None:
    original = doc(unique_name, "p", retrieval_count=1)
    await index.upsert([original])
    for patch in (
        DocumentPatch(importance_score=1.5),
        DocumentPatch(retrieval_count_increment=-2),
        DocumentPatch(decay_factor=-0.1),
    ):
        with pytest.raises(InvalidInputError):
            await index.update(unique_name, original.event_id, patch)
    assert await index.get(unique_name, original.event_id) == original


async def test_bulk_decay_is_written_in_sql_exactly_and_checked_first(
    index: SqliteMemoryIndex, path: Path, unique_name: str
) -> None:
    docs = [doc(unique_name, f"d{i}", retrieval_count=i) for i in range(3)]
    await index.upsert(docs)
    factor = 0.9**3  # 0.7290000000000001: the stored JSON must keep every digit
    decays = {d.event_id: DocumentPatch(decay_factor=factor) for d in docs[:2]}
    mixed = {**decays, docs[2].event_id: DocumentPatch(decay_factor=0.5, retrieval_count=9)}
    assert await index.update_many(unique_name, mixed) == 3
    first, second, third = [await index.get(unique_name, d.event_id) for d in docs]
    assert first == docs[0].model_copy(update={"decay_factor": factor})
    assert second == docs[1].model_copy(update={"decay_factor": factor})
    assert third == docs[2].model_copy(update={"decay_factor": 0.5, "retrieval_count": 9})
    reopened = SqliteMemoryIndex(path)  # what another process reads back
    try:
        assert await reopened.get(unique_name, docs[0].event_id) == first
    finally:
        await reopened.close()
    bad = {
        docs[0].event_id: DocumentPatch(decay_factor=0.2),
        docs[1].event_id: DocumentPatch(decay_factor=1.5),
    }
    with pytest.raises(InvalidInputError) as raised:
        await index.update_many(unique_name, bad)
    assert raised.value.problems[0].field == "decay_factor"
    assert await index.get(unique_name, docs[0].event_id) == first  # nothing applied
    assert await index.update_many("another-bank", decays) == 0


async def test_bulk_retrieval_counts_are_added_in_sql_like_the_patch_would(
    index: SqliteMemoryIndex, path: Path, unique_name: str
) -> None:
    docs = [doc(unique_name, f"c{i}", retrieval_count=i) for i in range(4)]
    await index.upsert(docs)
    counted = {
        docs[0].event_id: DocumentPatch(retrieval_count_increment=1),
        docs[1].event_id: DocumentPatch(retrieval_count_increment=5),
        # not a count alone: through the validating path, in the same transaction
        docs[2].event_id: DocumentPatch(retrieval_count_increment=2, importance_score=0.9),
        "no-such-memory": DocumentPatch(retrieval_count_increment=1),
    }
    assert await index.update_many(unique_name, counted) == 3
    expected = [
        docs[0].model_copy(update={"retrieval_count": 1}),
        docs[1].model_copy(update={"retrieval_count": 6}),
        docs[2].model_copy(update={"retrieval_count": 4, "importance_score": 0.9}),
        docs[3],
    ]
    assert [await index.get(unique_name, d.event_id) for d in docs] == expected
    reopened = SqliteMemoryIndex(path)  # what another process reads back
    try:
        assert [await reopened.get(unique_name, d.event_id) for d in docs] == expected
    finally:
        await reopened.close()
    # a negative increment is checked against the bound, and nothing of the batch applied
    with pytest.raises(InvalidInputError):
        await index.update_many(
            unique_name,
            {
                docs[0].event_id: DocumentPatch(retrieval_count_increment=1),
                docs[3].event_id: DocumentPatch(retrieval_count_increment=-4),
            },
        )
    assert await index.get(unique_name, docs[0].event_id) == expected[0]


async def test_without_ensure_the_first_document_sets_the_dimension(
    path: Path, unique_name: str
) -> None:
    index = SqliteMemoryIndex(path)
    try:
        await index.upsert([doc(unique_name, "first")])
        with pytest.raises(ConfigurationError):
            await index.ensure(dimension=DIMENSION + 1)
        with pytest.raises(ConfigurationError):
            await index.upsert([doc(unique_name, "short", embedding=[1.0, 0.0])])
    finally:
        await index.close()
    reopened = SqliteMemoryIndex(path)
    try:
        with pytest.raises(ConfigurationError):
            await reopened.upsert([doc(unique_name, "short", embedding=[1.0, 0.0])])
    finally:
        await reopened.close()


async def test_empty_embeddings_and_bad_dimensions_are_configuration_errors(
    path: Path, unique_name: str
) -> None:
    index = SqliteMemoryIndex(path)
    try:
        with pytest.raises(ConfigurationError):
            await index.ensure(dimension=0)
        with pytest.raises(ConfigurationError):
            await index.upsert([doc(unique_name, "empty", embedding=[])])
    finally:
        await index.close()


async def test_a_newer_schema_is_refused(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    conn.close()
    index = SqliteMemoryIndex(path)
    try:
        with pytest.raises(ConfigurationError, match="newer"):
            await index.count()
    finally:
        await index.close()


@pytest.fixture
def garbage(path: Path) -> Path:
    path.write_bytes(b"certainly not sqlite " * 100)
    return path


async def test_a_file_that_is_not_a_database_is_a_configuration_error(garbage: Path) -> None:
    index = SqliteMemoryIndex(garbage)
    try:
        with pytest.raises(ConfigurationError):
            await index.count()
    finally:
        await index.close()


async def test_a_missing_directory_is_a_configuration_error(data_dir: Path) -> None:
    index = SqliteMemoryIndex(data_dir / "absent" / "index.sqlite3")
    try:
        with pytest.raises(ConfigurationError):
            await index.count()
    finally:
        await index.close()


async def test_a_held_write_lock_is_unavailable_then_clears(path: Path, unique_name: str) -> None:
    index = SqliteMemoryIndex(path, busy_timeout_s=0.05)
    try:
        await index.ensure(dimension=DIMENSION)
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            with pytest.raises(UnavailableError) as caught:
                await index.upsert([doc(unique_name, "blocked")])
            assert caught.value.retryable
            blocker.execute("ROLLBACK")
        finally:
            blocker.close()
        await index.upsert([doc(unique_name, "blocked")])
        assert await index.count(unique_name) == 1
    finally:
        await index.close()


async def test_close_is_idempotent_and_final(path: Path) -> None:
    index = SqliteMemoryIndex(path)
    await index.count()
    await index.close()
    await index.close()
    with pytest.raises(RuntimeError):
        await index.count()


async def test_a_warm_vector_cache_follows_replaced_filter_fields(
    index: SqliteMemoryIndex, unique_name: str
) -> None:
    bank = unique_name
    await index.upsert([doc(bank, "m", tags=["old"], fact_type=FactType.WORLD)])
    query = axis(DIMENSION)
    assert len(await index.search_vector(query, SearchFilters(bank_id=bank), size=5)) == 1
    await index.upsert(
        [
            doc(
                bank,
                "m",
                tags=["new"],
                fact_type=FactType.PROCEDURE,
                importance=0.9,
                timestamp=BASE_TIME + timedelta(days=1),
            )
        ]
    )

    async def found(**filters: object) -> int:
        chosen = SearchFilters(bank_id=bank, **filters)  # type: ignore[arg-type]
        return len(await index.search_vector(query, chosen, size=5))

    assert await found(tags_any=frozenset({"old"})) == 0
    assert await found(tags_any=frozenset({"new"})) == 1
    assert await found(fact_types=frozenset({FactType.WORLD})) == 0
    assert await found(fact_types=frozenset({FactType.PROCEDURE})) == 1
    assert await found(until=BASE_TIME + timedelta(hours=1)) == 0
    assert await found(min_importance=0.9) == 1


async def test_a_tag_filter_sees_tag_sets_that_appear_after_it_was_first_used(
    index: SqliteMemoryIndex, unique_name: str
) -> None:
    bank = unique_name
    await index.upsert([doc(bank, "a", tags=["red"]), doc(bank, "b", tags=["red", "blue"])])
    query = axis(DIMENSION)

    async def tagged(*tags: str) -> set[str]:
        chosen = SearchFilters(bank_id=bank, tags_any=frozenset(tags))
        return {hit.document.event_id for hit in await index.search_vector(query, chosen, size=9)}

    assert await tagged("blue") == {f"{bank}-b"}
    await index.upsert([doc(bank, "c", tags=["green", "blue"]), doc(bank, "d", tags=["blue"])])
    assert await tagged("blue") == {f"{bank}-b", f"{bank}-c", f"{bank}-d"}  # sets new since
    assert await tagged("green", "red") == {f"{bank}-a", f"{bank}-b", f"{bank}-c"}
    await index.delete(bank, f"{bank}-c")
    await index.update(bank, f"{bank}-b", DocumentPatch(drop_tags_under=("blue",)))
    assert await tagged("blue") == {f"{bank}-d"}
    assert await tagged("red") == {f"{bank}-a", f"{bank}-b"}


async def test_deleted_slots_are_reused(index: SqliteMemoryIndex, unique_name: str) -> None:
    bank = unique_name
    await index.upsert([doc(bank, f"d{i}", embedding=unit_vector(i, DIMENSION)) for i in range(5)])
    everything = SearchFilters(bank_id=bank)
    assert len(await index.search_vector(axis(DIMENSION), everything, size=10)) == 5
    for i in range(3):
        await index.delete(bank, f"{bank}-d{i}")
    await index.upsert(
        [doc(bank, f"e{i}", embedding=unit_vector(10 + i, DIMENSION)) for i in range(3)]
    )
    hits = await index.search_vector(axis(DIMENSION), everything, size=10)
    assert sorted(hit.document.event_id for hit in hits) == sorted(
        [f"{bank}-d3", f"{bank}-d4", f"{bank}-e0", f"{bank}-e1", f"{bank}-e2"]
    )


async def test_the_fts_table_stays_consistent(
    index: SqliteMemoryIndex, path: Path, unique_name: str
) -> None:
    bank = unique_name
    for round_ in range(3):
        await index.upsert(
            [
                doc(bank, f"r{i}", summary=f"round{round_} item{i}", tags=[f"t{round_}"])
                for i in range(20)
            ]
        )
        await index.delete(bank, f"{bank}-r{round_}")
    hits = await index.search_text("round2", SearchFilters(bank_id=bank), size=50)
    assert len(hits) == 19  # r2 deleted last; r0 and r1 came back in later rounds
    assert await index.search_text("round0", SearchFilters(bank_id=bank), size=50) == []
    conn = sqlite3.connect(path)
    try:
        fts_rows = checked_text_rows(conn)
        (doc_rows,) = conn.execute("SELECT count(*) FROM documents").fetchone()
        assert fts_rows == doc_rows == 19
    finally:
        conn.close()


async def test_a_banks_text_scores_do_not_move_with_another_banks_documents(
    index: SqliteMemoryIndex, path: Path, unique_name: str
) -> None:
    mine, theirs = unique_name, f"{unique_name}-other"
    await index.upsert([doc(mine, f"m{i}", summary=f"plum tart number{i}") for i in range(5)])
    await index.upsert([doc(mine, f"p{i}", summary=f"pear pie number{i}") for i in range(15)])

    async def scores() -> list[tuple[str, float]]:
        hits = await index.search_text("plum pear", SearchFilters(mine), size=50)
        return [(hit.document.event_id, hit.score) for hit in hits]

    before = await scores()
    # With one table for all banks, these would make "plum" common and lower its idf.
    await index.upsert([doc(theirs, f"o{i}", summary=f"plum jam {i}") for i in range(200)])
    assert await scores() == before
    assert len(before) == 20 and before[0][0].startswith(f"{mine}-m")
    theirs_hits = await index.search_text("plum", SearchFilters(theirs), size=500)
    assert len(theirs_hits) == 200
    with sqlite3.connect(path) as conn:
        tables = dict(conn.execute("SELECT bank_id, text_table FROM text_tables").fetchall())
    conn.close()
    assert tables[mine] != tables[theirs]


async def test_a_bank_alone_in_its_table_gets_the_answer_the_filtered_join_gives(
    index: SqliteMemoryIndex, unique_name: str
) -> None:
    rng = random.Random(11)
    words = [f"w{n}" for n in range(12)]
    for bank in (unique_name, f"{unique_name}-b"):
        await index.upsert(
            [doc(bank, f"d{i}", summary=" ".join(rng.choices(words, k=6))) for i in range(60)]
        )
    for query in ("w0", "w1 w2", "w3 w4 w5 w11", "w7 nothing"):
        alone = await index.search_text(query, SearchFilters(unique_name), size=10)
        # A filter that passes every row takes the join instead.
        joined = SearchFilters(unique_name, min_importance=0.0)
        assert alone == await index.search_text(query, joined, size=10)
        assert alone and {hit.document.bank_id for hit in alone} == {unique_name}


async def test_past_the_table_limit_banks_share_tables_and_stay_apart(
    index: SqliteMemoryIndex, path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(text, "TEXT_TABLES", 2)
    banks = [f"{unique_name}-{n}" for n in range(5)]
    for bank in banks:
        await index.upsert([doc(bank, f"d{i}", summary=f"shared words {i}") for i in range(4)])
    await index.delete_many(banks[0], [f"{banks[0]}-d0", f"{banks[0]}-d1"])
    for n, bank in enumerate(banks):
        hits = await index.search_text("shared words", SearchFilters(bank), size=50)
        assert {hit.document.bank_id for hit in hits} == {bank}
        assert len(hits) == (2 if n == 0 else 4)
    with sqlite3.connect(path) as conn:
        names = {
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'"
            )
        }
        assert names == {"text_0", "text_1"}
        assert checked_text_rows(conn) == 18
    conn.close()


async def searched_everywhere(index: SqliteMemoryIndex, banks: list[str]) -> list[list[Hit]]:
    """Each bank's hits for a few queries, bank by bank."""
    queries = ["fig", "date", "t1", "fig date"]
    return [
        await index.search_text(query, SearchFilters(bank), size=50)
        for bank in banks
        for query in queries
    ]


async def test_a_version_1_file_is_split_into_text_tables_per_bank(
    path: Path, unique_name: str
) -> None:
    banks = [f"{unique_name}-{n}" for n in range(3)]
    index = SqliteMemoryIndex(path)
    try:
        for n, bank in enumerate(banks):
            await index.upsert(
                [
                    doc(bank, f"d{i}", summary=f"fig {'date ' * (i % 3)}{n}", tags=[f"t{i % 2}"])
                    for i in range(6 + n)
                ]
            )
        expected = await searched_everywhere(index, banks)
    finally:
        await index.close()
    with sqlite3.connect(path) as conn:  # back to version 1: one FTS table for every bank
        conn.execute(
            "CREATE VIRTUAL TABLE documents_fts USING fts5("
            "summary, tags, tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        conn.execute(
            "INSERT INTO documents_fts (rowid, summary, tags) SELECT doc_id, summary,"
            " (SELECT group_concat(value, ' ') FROM json_each(d.tags)) FROM documents AS d"
        )
        for (number,) in conn.execute("SELECT DISTINCT text_table FROM text_tables").fetchall():
            conn.execute(f"DROP TABLE text_{number}")
        conn.execute("DROP TABLE text_tables")
        conn.execute("PRAGMA user_version = 1")
    conn.close()
    reopened = SqliteMemoryIndex(path)
    try:
        found = await searched_everywhere(reopened, banks)
    finally:
        await reopened.close()
    assert found == expected and all(found)
    with sqlite3.connect(path) as conn:
        assert (
            conn.execute("SELECT name FROM sqlite_master WHERE name = 'documents_fts'").fetchall()
            == []
        )
        assert conn.execute("PRAGMA user_version").fetchone() == (schema.SCHEMA_VERSION,)
        assert checked_text_rows(conn) == 6 + 7 + 8
    conn.close()


async def four_a_bank_less_one(index: SqliteMemoryIndex, banks: list[str]) -> list[list[Hit]]:
    """Four documents written to each bank and one of the first bank's deleted, then
    ``searched_everywhere``; ``index`` is closed."""
    try:
        await index.upsert(
            [doc(bank, f"d{i}", summary=f"fig {i}") for bank in banks for i in range(4)]
        )
        await index.delete(banks[0], f"{banks[0]}-d3")
        return await searched_everywhere(index, banks)
    finally:
        await index.close()


async def test_a_version_2_file_is_rebuilt_for_ids_per_bank(path: Path, unique_name: str) -> None:
    banks = [unique_name, f"{unique_name}-b"]
    expected = await four_a_bank_less_one(SqliteMemoryIndex(path), banks)
    with sqlite3.connect(path) as conn:  # back to version 2: event_id alone is unique
        conn.execute("CREATE TABLE old_documents AS SELECT * FROM documents")
        conn.execute("DROP TABLE documents")
        columns = schema.DOCUMENT_COLUMNS.replace(
            "event_id TEXT NOT NULL,", "event_id TEXT NOT NULL UNIQUE,"
        ).replace(",\n    text_seq INTEGER", "")  # (version 4 added it)
        assert "text_seq" not in columns
        conn.execute(f"CREATE TABLE documents ({columns})")
        named = "doc_id, event_id, bank_id, fact_type, ts_us, importance_score, tags, seq,"
        named += " summary, body, embedding"
        conn.execute(f"INSERT INTO documents SELECT {named} FROM old_documents")
        conn.execute("DROP TABLE old_documents")
        conn.execute("DROP TABLE tombstones")
        conn.execute("CREATE TABLE tombstones (event_id TEXT PRIMARY KEY, seq INTEGER NOT NULL)")
        conn.execute("PRAGMA user_version = 2")
    conn.close()
    reopened = SqliteMemoryIndex(path)
    try:
        assert await searched_everywhere(reopened, banks) == expected
        twin = doc(banks[1], "twin", summary="fig twin")
        moved = twin.model_copy(update={"event_id": f"{banks[0]}-d0"})
        await reopened.upsert([moved])  # an id of the first bank, now also in the second
        assert (await reopened.get(banks[0], f"{banks[0]}-d0")).summary == "fig 0"  # type: ignore[union-attr]
        assert (await reopened.get(banks[1], f"{banks[0]}-d0")).summary == "fig twin"  # type: ignore[union-attr]
        hits = await reopened.search_vector(axis(8), SearchFilters(banks[1]), size=10)
        assert f"{banks[0]}-d0" in {hit.document.event_id for hit in hits}
    finally:
        await reopened.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (schema.SCHEMA_VERSION,)
        assert checked_text_rows(conn) == 4 + 3 + 1
    conn.close()


async def test_a_version_3_file_s_text_tables_gain_the_detail_column(
    path: Path, unique_name: str
) -> None:
    banks = [unique_name, f"{unique_name}-b"]
    expected = await four_a_bank_less_one(SqliteMemoryIndex(path, text_engine="fts5"), banks)
    with sqlite3.connect(path) as conn:  # back to version 3: summary and tags alone, no text_seq
        conn.execute("DROP INDEX documents_by_text_seq")
        conn.execute("ALTER TABLE documents DROP COLUMN text_seq")
        for (number,) in conn.execute("SELECT DISTINCT text_table FROM text_tables").fetchall():
            table = f"text_{number}"
            conn.execute(f"ALTER TABLE {table} RENAME TO old_{number}")
            conn.execute(
                f"CREATE VIRTUAL TABLE {table} USING fts5("
                "summary, tags, tokenize = 'porter unicode61 remove_diacritics 2')"
            )
            conn.execute(
                f"INSERT INTO {table} (rowid, summary, tags)"
                f" SELECT rowid, summary, tags FROM old_{number}"
            )
            conn.execute(f"DROP TABLE old_{number}")
        conn.execute("PRAGMA user_version = 3")
    conn.close()
    reopened = SqliteMemoryIndex(path, text_engine="fts5")
    try:
        assert await searched_everywhere(reopened, banks) == expected
        await reopened.upsert([doc(banks[1], "long", summary="fig long", detail="a kumquat")])
        hits = await reopened.search_text("kumquat", SearchFilters(banks[1]), size=5)
        assert [hit.document.event_id for hit in hits] == [f"{banks[1]}-long"]
    finally:
        await reopened.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (schema.SCHEMA_VERSION,)
        assert checked_text_rows(conn) == 4 + 3 + 1
        for (number,) in conn.execute("SELECT DISTINCT text_table FROM text_tables").fetchall():
            columns = conn.execute(f"SELECT * FROM text_{number} LIMIT 0").description
            assert [column[0] for column in columns] == ["summary", "tags", "detail"]
        text_seqs = conn.execute("SELECT event_id, text_seq FROM documents").fetchall()
        assert {seq is None for event_id, seq in text_seqs if event_id != f"{banks[1]}-long"} == {
            True
        }  # rows from before: nothing has changed their text since
        assert dict(text_seqs)[f"{banks[1]}-long"] is not None
    conn.close()


async def test_staged_text_search_returns_what_the_full_query_returns(
    fts5_index: SqliteMemoryIndex, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = fts5_index
    rng = random.Random(5)
    vocabulary = [f"v{rank}" for rank in range(40)]
    weights = [1.0 / (rank + 1) for rank in range(40)]
    banks = [unique_name, f"{unique_name}-b"]
    await index.upsert(
        [
            doc(
                rng.choice(banks),
                f"x{i}",
                summary=" ".join(rng.choices(vocabulary, weights, k=rng.randint(3, 12))),
                # a third of the rows with a detail: all three columns in the bound
                detail=" ".join(
                    rng.choices(vocabulary, weights, k=rng.randint(0, 30) * (i % 3 == 0))
                ),
                fact_type=rng.choice([FactType.WORLD, FactType.EXPERIENCE, None]),
                importance=rng.random(),
            )
            for i in range(1500)
        ]
    )
    queries = [" ".join(rng.choices(vocabulary, weights, k=rng.randint(2, 5))) for _ in range(60)]
    filter_sets = [
        SearchFilters(bank_id=unique_name),
        SearchFilters(
            bank_id=unique_name, min_importance=0.4, fact_types=frozenset({FactType.WORLD})
        ),
    ]

    stages_used: list[int] = []

    def recording_stages(*args: Any, **kwargs: Any) -> list[Fts5Stage] | None:
        stages = fts5_stages(*args, **kwargs)
        stages_used.append(0 if stages is None else len(stages))
        return stages

    monkeypatch.setattr(text, "fts5_stages", recording_stages)
    # Exactness of the stages alone: staged whenever over budget, no term left out.
    monkeypatch.setattr(text, "fts5_staging_pays", lambda doc_freqs: True)
    monkeypatch.setattr(
        text, "fts5_weighty_terms", lambda terms, freqs, total, budget: (terms, freqs)
    )

    async def results() -> list[list[tuple[str, float]]]:
        return [
            [(hit.document.event_id, hit.score) for hit in await index.search_text(q, f, size=8)]
            for q in queries
            for f in filter_sets
        ]

    monkeypatch.setattr(text, "STAGE_BUDGET", 10**9)
    full = await results()
    assert not any(stages_used)  # one full query each
    monkeypatch.setattr(text, "STAGE_BUDGET", 50)
    staged = await results()
    assert sum(1 for used in stages_used if used) >= 60
    for got, expected in zip(staged, full, strict=True):
        assert [event for event, _ in got] == [event for event, _ in expected]
        assert [score for _, score in got] == pytest.approx([s for _, s in expected], rel=1e-9)


async def test_a_term_in_half_the_documents_or_more_is_left_out_above_the_budget(
    fts5_index: SqliteMemoryIndex, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = fts5_index
    rng = random.Random(8)
    words = ["kiwi", "mango", "fig", "plum"]
    docs = [
        doc(
            unique_name,
            f"s{i}",
            summary=" ".join(["service", *rng.sample(words, rng.randint(0, 2))]),
        )
        for i in range(300)
    ]
    await index.upsert(docs)
    filters = SearchFilters(bank_id=unique_name)

    async def top(query: str) -> list[Hit]:
        return await index.search_text(query, filters, size=200)

    monkeypatch.setattr(text, "STAGE_BUDGET", 10**9)
    whole = await top("kiwi service fig")
    monkeypatch.setattr(text, "STAGE_BUDGET", 50)
    trimmed = await top("kiwi service fig")

    holding = {d.event_id for d in docs if {"kiwi", "fig"} & set(d.summary.split())}
    assert {hit.document.event_id for hit in trimmed} == holding
    assert len(whole) == 200 > len(holding)  # the whole query pads with "service"-only rows
    # The rows both return come in the same order, at scores within bm25's idf floor.
    kept = [hit for hit in whole if hit.document.event_id in holding]
    assert [h.document.event_id for h in trimmed] == [h.document.event_id for h in kept]
    assert [h.score for h in trimmed] == pytest.approx([h.score for h in kept], abs=1e-5)
    assert {h.document.event_id for h in await top("service")} <= {d.event_id for d in docs}


async def test_a_table_too_small_to_reach_the_budget_is_asked_without_counting_terms(
    fts5_index: SqliteMemoryIndex, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(9)
    words = ["kiwi", "mango", "fig", "plum", "service"]
    summaries = [" ".join(rng.sample(words, rng.randint(1, 3))) for _ in range(300)]
    await fts5_index.upsert([doc(unique_name, f"t{i}", summary=s) for i, s in enumerate(summaries)])
    counted: list[list[str]] = []

    def recording(terms: list[str], freqs: list[int], total: int, budget: int) -> Any:
        counted.append(list(terms))
        return fts5_weighty_terms(terms, freqs, total, budget=budget)

    monkeypatch.setattr(text, "fts5_weighty_terms", recording)

    async def top() -> list[tuple[str, float]]:
        hits = await fts5_index.search_text("kiwi fig plum", SearchFilters(unique_name), size=50)
        return [(hit.document.event_id, hit.score) for hit in hits]

    monkeypatch.setattr(text, "STAGE_BUDGET", 300 * 3)  # 3 terms x 300 rows: at most the budget
    uncounted = await top()
    assert counted == []
    monkeypatch.setattr(text, "STAGE_BUDGET", 300 * 3 - 1)
    assert await top() == uncounted
    assert counted == [["kiwi", "fig", "plum"]]


async def test_blocking_work_runs_off_the_event_loop(path: Path, unique_name: str) -> None:
    index = SqliteMemoryIndex(path, busy_timeout_s=20)
    try:
        await index.ensure(dimension=DIMENSION)
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            upsert = asyncio.create_task(index.upsert([doc(unique_name, "waits")]))
            for _ in range(5):
                await asyncio.sleep(0)  # the upsert task runs up to its first await
            # Had the upsert run on the loop, we would only get here after it gave up.
            assert not upsert.done()
            blocker.execute("ROLLBACK")
        finally:
            blocker.close()
        await upsert
        assert await index.count(unique_name) == 1
    finally:
        await index.close()


async def test_one_batch_of_new_changed_unchanged_revived_and_repeated_documents(
    index: SqliteMemoryIndex, path: Path, unique_name: str
) -> None:
    bank = unique_name
    await index.upsert([doc(bank, f"m{i}", summary=f"first item{i}") for i in range(6)])
    await index.delete(bank, f"{bank}-m5")
    other = SqliteMemoryIndex(path)  # a second instance with a warm cache must catch up
    try:
        assert len(await other.search_vector(axis(DIMENSION), SearchFilters(bank), size=50)) == 5
        await index.upsert(
            [
                doc(bank, "m0", summary="first item0", importance=0.9),  # same text
                doc(bank, "m1", summary="second item1"),  # new text
                doc(bank, "m5", summary="revived item5"),  # deleted before
                *(doc(bank, f"n{i}", summary=f"new item{i}") for i in range(3)),
            ]
        )
        await index.upsert([doc(bank, "d", summary="dup one"), doc(bank, "d", summary="dup two")])

        def found(query: str) -> list[str]:
            return sorted(h.document.event_id.removeprefix(f"{bank}-") for h in hits[query])

        hits = {
            query: await index.search_text(query, SearchFilters(bank), size=50)
            for query in ("first", "second", "revived", "new", "dup", "two", "one")
        }
        assert found("first") == ["m0", "m2", "m3", "m4"]
        assert found("second") == ["m1"] and found("revived") == ["m5"]
        assert found("new") == ["n0", "n1", "n2"]
        assert found("dup") == found("two") == ["d"] and found("one") == []
        m0 = await index.get(bank, f"{bank}-m0")
        assert m0 is not None and m0.importance_score == 0.9
        seen = await other.search_vector(axis(DIMENSION), SearchFilters(bank), size=50)
        assert len(seen) == await index.count(bank) == 10
    finally:
        await other.close()
    conn = sqlite3.connect(path)
    try:
        fts_rows = checked_text_rows(conn)
        (tombstones,) = conn.execute("SELECT count(*) FROM tombstones").fetchone()
        ids = [row[0] for row in conn.execute("SELECT doc_id FROM documents ORDER BY doc_id")]
        assert fts_rows == len(ids) == 10 and tombstones == 0
        assert len(set(ids)) == len(ids)
    finally:
        conn.close()


async def test_the_vector_cache_reports_its_bytes_as_it_grows(
    index: SqliteMemoryIndex, unique_name: str
) -> None:
    assert index.cached_vector_bytes == 0  # nothing searched, nothing cached
    await index.upsert([doc(unique_name, "first")])
    filters = SearchFilters(bank_id=unique_name)
    await index.search_vector(axis(DIMENSION), filters, size=1)
    small = index.cached_vector_bytes
    assert small >= DIMENSION * 4  # at least the one float32 column
    await index.upsert([doc(unique_name, f"more-{i}") for i in range(3000)])
    await index.search_vector(axis(DIMENSION), filters, size=1)
    assert index.cached_vector_bytes >= 3001 * DIMENSION * 4 > small


async def test_the_resident_data_counts_the_id_map_and_gives_it_back_on_delete(
    index: SqliteMemoryIndex, unique_name: str
) -> None:
    assert index.resident_data_bytes == 0
    documents = [doc(unique_name, f"m-{i}") for i in range(2000)]
    await index.upsert(documents)
    filters = SearchFilters(bank_id=unique_name)
    await index.search_vector(axis(DIMENSION), filters, size=1)
    ids = sum(sys.getsizeof(d.event_id) for d in documents)
    full = index.resident_data_bytes
    # The matrix and filter arrays, and more than the id strings alone besides them.
    assert full > index.cached_vector_bytes + ids
    assert await index.delete_many(unique_name, [d.event_id for d in documents[:1000]]) == 1000
    await index.search_vector(axis(DIMENSION), filters, size=1)
    # The arrays keep their capacity; the map gives back what its ids held.
    assert index.resident_data_bytes <= full - ids // 2


async def test_the_log_is_checkpointed_into_the_file_every_configured_pages(
    data_dir: Path, unique_name: str
) -> None:
    """A small setting keeps the write-ahead log small; a large one lets it grow."""
    wal_bytes = {}
    for pages in (8, 100_000):
        path = data_dir / f"index-{pages}.sqlite3"
        index = SqliteMemoryIndex(path, checkpoint_pages=pages)
        try:
            await index.ensure(dimension=DIMENSION)
            for batch in range(8):
                await index.upsert([doc(unique_name, f"{batch}-{i}") for i in range(200)])
            wal_bytes[pages] = os.stat(f"{path}-wal").st_size
        finally:
            await index.close()
    page = 4096
    assert wal_bytes[100_000] > 200 * page  # every batch's pages still in the log
    assert wal_bytes[8] < wal_bytes[100_000] / 2  # folded in as the pages passed 8


def test_a_checkpoint_of_no_pages_is_refused(data_dir: Path) -> None:
    with pytest.raises(ConfigurationError, match="checkpoint_pages must be at least 1"):
        SqliteMemoryIndex(data_dir / "index.sqlite3", checkpoint_pages=0)


MARKER = "Qv8Zx3Kw7Tn"  # one token no stemmer shortens


def files_holding_marker(path: Path) -> list[str]:
    """The database's files (``-wal`` included) whose bytes hold the marker in either case."""
    forms = (MARKER.encode(), MARKER.lower().encode())
    return sorted(
        file.name
        for file in path.parent.glob(f"{path.name}*")
        if any(form in file.read_bytes() for form in forms)
    )


async def forget_while_read(path: Path, bank: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """An index whose forget of the marker's document found a reader in the log."""
    monkeypatch.setattr(connections, "TRUNCATE_RETRY_S", 0.0)
    index = SqliteMemoryIndex(path, busy_timeout_s=0.2)
    reader = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        await index.ensure(dimension=DIMENSION)
        await index.count()  # reads have started: a later read goes to a reader thread alone
        await index.upsert([doc(bank, f"filler-{i}") for i in range(50)])
        await index.upsert([doc(bank, "secret", summary=f"the vault code is {MARKER}")])
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM documents").fetchone()  # a snapshot held open
        assert await index.delete(bank, f"{bank}-secret")
        assert "index.sqlite3-wal" in files_holding_marker(path)  # the reader kept the log
        reader.execute("COMMIT")
    except BaseException:
        await index.close()
        raise
    finally:
        reader.close()
    return index


async def test_a_truncate_a_reader_prevented_is_done_by_the_next_write(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = await forget_while_read(path, unique_name, monkeypatch)
    try:
        await index.upsert([doc(unique_name, "later")])
        assert files_holding_marker(path) == []  # while the index is still open
    finally:
        await index.close()


async def test_a_truncate_a_reader_prevented_is_done_on_the_next_read(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = await forget_while_read(path, unique_name, monkeypatch)
    try:
        filters = SearchFilters(unique_name)
        await index.search_text("filler", filters, size=1)
        for _ in range(250):  # the retry runs on the writer thread, not awaited by the read
            if not files_holding_marker(path):
                break
            await asyncio.sleep(0.02)
        assert files_holding_marker(path) == []
    finally:
        await index.close()


@pytest.mark.parametrize(
    ("size", "taken"), [(1, 16), (16, 16), (28, 32), (81, 96), (512, 512), (513, 513)]
)
def test_an_id_map_entry_is_counted_as_the_blocks_pymalloc_serves(size: int, taken: int) -> None:
    assert vectors.block_bytes(size) == taken
