"""Recall's decoded rows: reused while a row is unchanged, bounded, aged, emptied by forgets."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cogsub.core.documents import IndexDocument
from cogsub.index.ports import DocumentPatch, SearchFilters
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.index.sqlite.recall import DecodedRows
from tests.contract.index_contract import axis, make_doc

DIMENSION = 8
BANK = "rows"


def body(name: str, summary: str = "a plain memory") -> str:
    """A document as the index stores it: JSON without the embedding."""
    stored = make_doc(BANK, name, summary=summary, dimension=DIMENSION).model_dump(mode="json")
    del stored["embedding"]
    return json.dumps(stored)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_an_unchanged_row_is_decoded_once_and_a_new_version_again() -> None:
    rows = DecodedRows()
    assert rows.known(1, 10) is None
    first, blob = rows.keep(1, 10, body("a", "kiwi"), b"vector-a")
    assert rows.known(1, 10) == (first, b"vector-a") and rows.known(1, 10)[0] is first  # type: ignore[index]
    assert rows.known(1, 11) is None  # another version of the row
    changed, _ = rows.keep(1, 11, body("a", "mango"), b"vector-b")
    assert changed is not first and changed.summary == "mango"
    assert changed.embedding == []  # the vector travels as the matrix, never in the document
    assert rows.known(1, 11) == (changed, b"vector-b") and rows.known(1, 10) is None


def test_the_oldest_entry_goes_first_and_the_count_stays_bounded() -> None:
    rows = DecodedRows(max_rows=2)
    rows.keep(1, 1, body("one"), b"1")
    rows.keep(2, 1, body("two"), b"2")
    rows.keep(3, 1, body("three"), b"3")
    assert len(rows) == 2
    assert rows.known(1, 1) is None  # evicted: read and decoded again
    assert rows.known(3, 1) is not None
    assert len(rows) == 2


def test_an_entry_past_its_age_is_decoded_again() -> None:
    clock = Clock()
    rows = DecodedRows(max_age_s=300.0, clock=clock)
    first, _ = rows.keep(1, 1, body("a"), b"a")
    clock.now = 300.0
    assert rows.known(1, 1) == (first, b"a")
    clock.now = 300.5
    assert rows.known(1, 1) is None


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[SqliteMemoryIndex]:
    opened = SqliteMemoryIndex(tmp_path / "index.sqlite3")
    await opened.ensure(dimension=DIMENSION)
    yield opened
    await opened.close()


async def _recalled(index: SqliteMemoryIndex, query: str) -> list[IndexDocument]:
    found = await index.recall_candidates(
        query, axis(DIMENSION), SearchFilters(bank_id=BANK), text_pool=10, vector_pool=10
    )
    return [hit.document for hit in (*found.text, *found.vector)]


async def test_recall_sees_a_patched_row_at_once(index: SqliteMemoryIndex) -> None:
    await index.upsert([make_doc(BANK, "a", summary="kiwi orchard", dimension=DIMENSION)])
    first = await _recalled(index, "kiwi")
    assert {d.retrieval_count for d in first} == {0}
    assert all(again is first[0] for again in await _recalled(index, "kiwi"))  # decoded once
    await index.update(BANK, f"{BANK}-a", DocumentPatch(retrieval_count_increment=3))
    assert {d.retrieval_count for d in await _recalled(index, "kiwi")} == {3}


async def test_a_delete_leaves_no_decoded_text_behind(index: SqliteMemoryIndex) -> None:
    secret = "the safe combination is 4471"
    await index.upsert(
        [
            make_doc(BANK, "secret", summary=secret, dimension=DIMENSION),
            make_doc(BANK, "kept", summary="safe deposit hours", dimension=DIMENSION),
        ]
    )
    assert secret in {d.summary for d in await _recalled(index, "safe")}
    # White box on purpose: the cache is where a forgotten text could linger in memory.
    decoded = index._decoded  # noqa: SLF001
    assert len(decoded) == 2
    await index.delete(BANK, f"{BANK}-secret")
    assert len(decoded) == 0
    assert secret not in {d.summary for d in await _recalled(index, "safe")}


async def test_a_rewritten_row_brings_its_new_vector_and_an_unchanged_one_its_kept_one(
    index: SqliteMemoryIndex,
) -> None:
    one_way = [1.0] + [0.0] * (DIMENSION - 1)
    other_way = [0.0, 1.0] + [0.0] * (DIMENSION - 2)
    await index.upsert(
        [
            make_doc(BANK, "a", summary="kiwi orchard", embedding=one_way, dimension=DIMENSION),
            make_doc(BANK, "b", summary="kiwi jam", embedding=one_way, dimension=DIMENSION),
        ]
    )

    async def vectors() -> dict[str, list[float]]:
        found = await index.recall_candidates(
            "kiwi", axis(DIMENSION), SearchFilters(bank_id=BANK), text_pool=10, vector_pool=10
        )
        ids = [f"{BANK}-a", f"{BANK}-b"]
        rows = found.embeddings.rows_of(ids)
        assert rows is not None
        return dict(zip(ids, rows.tolist(), strict=True))

    assert await vectors() == {f"{BANK}-a": one_way, f"{BANK}-b": one_way}
    await index.upsert(
        [make_doc(BANK, "a", summary="kiwi orchard", embedding=other_way, dimension=DIMENSION)]
    )
    assert await vectors() == {f"{BANK}-a": other_way, f"{BANK}-b": one_way}
