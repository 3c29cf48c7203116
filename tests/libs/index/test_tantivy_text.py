"""The tantivy text arm beyond the contract: crashes between the two commits, forgets, rebuilds."""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tantivy

from cogsub.index.ports import DocumentPatch, SearchFilters
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.index.sqlite.tantivy_query import FTS5_IDF_FLOOR, idf_to_fts5
from cogsub.index.sqlite.tantivy_text import TEXT_STORE_VERSION, TantivyText, text_root
from tests.contract.index_contract import make_doc
from tests.libs.index.tantivy_store import calls_of, stored_state

DIMENSION = 8
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def path(data_dir: Path) -> Path:
    return data_dir / "index.sqlite3"


def opened(path: Path, catch_up_s: float = 0) -> SqliteMemoryIndex:
    """Every bank indexed; caught up after every write unless ``catch_up_s`` says otherwise."""
    return SqliteMemoryIndex(path, text_engine="tantivy", large_bank=0, text_catch_up_s=catch_up_s)


async def found(index: SqliteMemoryIndex, bank: str, query: str) -> list[str]:
    hits = await index.search_text(query, SearchFilters(bank_id=bank), size=50)
    return sorted(hit.document.event_id for hit in hits)


def documents_holding(root: Path, field: str, token: str) -> int:
    """Documents holding ``token`` in any index directory of the store, deleted ones too.

    tantivy compresses its term dictionary, so the bytes are no test; a term's
    document frequency counts documents only marked deleted as well.
    """
    total = 0
    for directory in (p for p in root.iterdir() if p.is_dir()):
        total += tantivy.Index.open(str(directory)).searcher().doc_freq(field, token)
    return total


def test_the_store_sits_beside_the_file_and_memory_has_none() -> None:
    assert text_root("/data/index.sqlite3") == Path("/data/index.text")
    assert text_root("/data/index") == Path("/data/index.text")
    assert text_root(":memory:") is None


async def test_a_write_tantivy_never_saw_is_applied_when_the_index_is_opened_again(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = opened(path)
    await index.upsert(
        [make_doc(unique_name, "kept", summary="kiwi orchard"), make_doc(unique_name, "gone")]
    )
    # The process "dies" after each SQLite commit, before tantivy hears of it.
    monkeypatch.setattr(TantivyText, "catch_up", lambda self, conn: None)
    await index.upsert([make_doc(unique_name, "late", summary="kiwi harvest")])
    await index.delete(unique_name, f"{unique_name}-gone")
    await index.update(unique_name, f"{unique_name}-kept", DocumentPatch(add_tags=("fruit",)))
    # tantivy is behind the file: FTS5 scores the rows it lacks, so the search is still right.
    assert await found(index, unique_name, "harvest") == [f"{unique_name}-late"]
    await index.close()
    monkeypatch.undo()

    reopened = opened(path)
    try:
        assert await found(reopened, unique_name, "kiwi") == [
            f"{unique_name}-kept",
            f"{unique_name}-late",
        ]
        assert await found(reopened, unique_name, "fruit") == [f"{unique_name}-kept"]
        assert await found(reopened, unique_name, "plain memory") == []
    finally:
        await reopened.close()


_DIES_AFTER_THE_SQLITE_COMMIT = """
import asyncio, os, sys
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.index.sqlite.tantivy_text import TantivyText
from tests.contract.index_contract import make_doc

async def main(path, bank):
    index = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=0, text_catch_up_s=0)
    await index.upsert([make_doc(bank, "first", summary="walnut grove")])
    TantivyText.catch_up = lambda self, conn: os._exit(9)
    await index.upsert([make_doc(bank, "second", summary="walnut shells")])

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


async def test_a_process_killed_between_the_two_commits_loses_nothing(
    path: Path, unique_name: str
) -> None:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    died = await asyncio.to_thread(
        subprocess.run,  # killed by its timeout if it outlives it
        [sys.executable, "-c", _DIES_AFTER_THE_SQLITE_COMMIT, str(path), unique_name],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert died.returncode == 9, died.stderr.decode()
    index = opened(path)
    try:
        assert await found(index, unique_name, "walnut") == [
            f"{unique_name}-first",
            f"{unique_name}-second",
        ]
    finally:
        await index.close()


async def test_a_forgotten_memorys_text_is_in_no_file_of_the_store(
    path: Path, unique_name: str
) -> None:
    index = opened(path)
    try:
        await index.upsert(
            [
                make_doc(unique_name, "secret", summary="quixotically zebrawood"),
                make_doc(unique_name, "other", summary="ordinary zebrawood"),
            ]
        )
        root = text_root(str(path))
        assert root is not None
        secret = f"{unique_name}-secret"
        assert documents_holding(root, "summary", "quixot") == 1
        assert documents_holding(root, "event_id", secret) == 1
        await index.delete(unique_name, secret)
        assert documents_holding(root, "summary", "quixot") == 0
        assert documents_holding(root, "event_id", secret) == 0
        assert documents_holding(root, "summary", "zebrawood") == 1
        assert await found(index, unique_name, "zebrawood") == [f"{unique_name}-other"]
    finally:
        await index.close()


async def test_forgetting_a_banks_last_memory_leaves_it_no_directory(
    path: Path, unique_name: str
) -> None:
    index = opened(path)
    try:
        await index.upsert([make_doc(unique_name, "only", summary="solitary heron")])
        root = text_root(str(path))
        assert root is not None
        await index.delete(unique_name, f"{unique_name}-only")
        assert [p for p in root.iterdir() if p.is_dir()] == []
        assert await found(index, unique_name, "heron") == []
    finally:
        await index.close()


@pytest.mark.parametrize("damage", ["removed", "other_version", "garbled"])
async def test_a_lost_or_foreign_store_is_rebuilt_from_the_rows(
    path: Path, unique_name: str, damage: str
) -> None:
    index = opened(path)
    await index.upsert([make_doc(unique_name, "a", summary="copper kettle")])
    await index.close()
    root = text_root(str(path))
    assert root is not None
    state = root / "state.json"
    if damage == "removed":
        shutil.rmtree(root)
    elif damage == "other_version":
        raw = json.loads(state.read_text())
        state.write_text(json.dumps({**raw, "version": TEXT_STORE_VERSION + 1}))
    else:
        state.write_text("{not json")
    reopened = opened(path)
    try:
        assert await found(reopened, unique_name, "kettle") == [f"{unique_name}-a"]
    finally:
        await reopened.close()


async def test_a_store_made_from_another_file_is_not_trusted(
    data_dir: Path, unique_name: str
) -> None:
    """A replaced SQLite file (a replay's new version) finds the old file's store beside it."""
    live, other = data_dir / "index.sqlite3", data_dir / "other" / "index.sqlite3"
    other.parent.mkdir()
    first = opened(live)
    await first.upsert([make_doc(unique_name, "old", summary="brass lantern")])
    await first.close()
    second = opened(other)
    await second.upsert([make_doc(unique_name, "new", summary="brass lantern")])
    await second.upsert([make_doc(unique_name, "newer", summary="brass lantern")])
    await second.close()
    live.unlink()
    shutil.move(other, live)
    reopened = opened(live)
    try:
        assert await found(reopened, unique_name, "lantern") == [
            f"{unique_name}-new",
            f"{unique_name}-newer",
        ]
    finally:
        await reopened.close()


async def test_mutable_filters_widen_the_fetch_until_enough_pass(
    path: Path, unique_name: str
) -> None:
    index = opened(path)
    try:
        loud = [make_doc(unique_name, f"loud{i}", summary="kiwi kiwi kiwi") for i in range(40)]
        quiet = [
            make_doc(
                unique_name, f"quiet{i}", summary="kiwi and many other words here", importance=0.9
            )
            for i in range(3)
        ]
        await index.upsert(loud + quiet)
        at_least = SearchFilters(bank_id=unique_name, min_importance=0.8)
        hits = await index.search_text("kiwi", at_least, size=3)
        assert sorted(h.document.event_id for h in hits) == sorted(d.event_id for d in quiet)
        # A signal-only update commits nothing to tantivy; the filter still sees it.
        await index.update(
            unique_name, f"{unique_name}-loud0", DocumentPatch(importance_score=0.95)
        )
        hits = await index.search_text("kiwi", at_least, size=10)
        assert f"{unique_name}-loud0" in {h.document.event_id for h in hits}
        assert len(hits) == 4
    finally:
        await index.close()


async def test_in_memory_the_store_lives_in_ram_and_forgets_too(unique_name: str) -> None:
    index = SqliteMemoryIndex(":memory:", text_engine="tantivy", large_bank=0, text_catch_up_s=0)
    try:
        await index.upsert(
            [make_doc(unique_name, "a", summary="amber fox"), make_doc(unique_name, "b")]
        )
        assert await found(index, unique_name, "fox") == [f"{unique_name}-a"]
        await index.delete(unique_name, f"{unique_name}-a")
        assert await found(index, unique_name, "fox") == []
    finally:
        await index.close()


def test_an_unknown_engine_is_a_configuration_error(path: Path) -> None:
    from cogsub.core import ConfigurationError

    with pytest.raises(ConfigurationError, match="text_engine must be one of fts5, tantivy"):
        SqliteMemoryIndex(path, text_engine="lucene")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("documents", "holding", "fts5_idf"),
    [
        (1000, 1, math.log(999.5 / 1.5)),
        (400, 10, math.log(390.5 / 10.5)),
        (400, 199, math.log(201.5 / 199.5)),
        (400, 200, FTS5_IDF_FLOOR),  # half the documents: FTS5 floors it
        (400, 400, FTS5_IDF_FLOOR),
        (3, 5, FTS5_IDF_FLOOR),  # deleted documents still counted by tantivy's frequency
    ],
)
def test_a_terms_weight_turns_tantivys_idf_into_fts5s(
    documents: int, holding: int, fts5_idf: float
) -> None:
    n = max(documents, holding)
    tantivy_idf = math.log1p((n - holding + 0.5) / (holding + 0.5))
    assert idf_to_fts5(documents, holding) * tantivy_idf == pytest.approx(fts5_idf)
    assert idf_to_fts5(documents, holding, holding) == idf_to_fts5(documents, holding)


def test_fts5s_idf_counts_the_rows_holding_a_term_in_any_field() -> None:
    in_this_field = math.log1p((1000 - 2 + 0.5) / (2 + 0.5))  # tantivy's, two in this field
    in_any_field = math.log((1000 - 40 + 0.5) / (40 + 0.5))  # FTS5's, forty rows in all
    assert idf_to_fts5(1000, 2, 40) * in_this_field == pytest.approx(in_any_field)


async def test_a_word_in_most_documents_scores_next_to_nothing(
    path: Path, unique_name: str
) -> None:
    """A speaker's name on every turn must not outweigh the rarer word, as in FTS5."""
    index = opened(path)
    try:
        turns = [make_doc(unique_name, f"t{i}", summary=f"Caroline: day {i}") for i in range(9)]
        rare = make_doc(unique_name, "rare", summary="Melanie: pottery class")
        await index.upsert([*turns, rare])
        hits = await index.search_text(
            "Caroline pottery", SearchFilters(bank_id=unique_name), size=10
        )
        assert hits[0].document.event_id == rare.event_id
        assert max(h.score for h in hits[1:]) < 1e-3 * hits[0].score
    finally:
        await index.close()


@pytest.mark.parametrize("engine", ["fts5", "tantivy"])
async def test_a_name_in_every_summary_weighs_nothing_in_a_detail_either(
    path: Path, unique_name: str, engine: str
) -> None:
    """FTS5 counts the rows holding a word in any column; tantivy weighs each field's
    match by that count too, or a name rare in details would outweigh the answer."""
    index = SqliteMemoryIndex(path, text_engine=engine, large_bank=0, text_catch_up_s=0)  # type: ignore[arg-type]
    try:
        turns = [make_doc(unique_name, f"t{i}", summary=f"Caroline: day {i}") for i in range(9)]
        named = make_doc(unique_name, "named", summary="Melanie: a long day", detail="Caroline")
        answer = make_doc(unique_name, "answer", summary="Melanie: pottery class")
        await index.upsert([*turns, named, answer])
        hits = await index.search_text(
            "Caroline pottery", SearchFilters(bank_id=unique_name), size=20
        )
        assert hits[0].document.event_id == answer.event_id
        assert max(h.score for h in hits[1:]) < 1e-3 * hits[0].score
    finally:
        await index.close()


def test_without_tantivy_installed_fts5_still_answers_and_the_error_says_so(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tantivy is a dependency; an install that lacks it can still choose FTS5 alone."""
    monkeypatch.setitem(sys.modules, "tantivy", None)  # import tantivy now raises ImportError
    monkeypatch.delitem(sys.modules, "cogsub.index.sqlite.tantivy_text")
    SqliteMemoryIndex(path, text_engine="fts5")  # fine
    from cogsub.core import ConfigurationError

    with pytest.raises(ConfigurationError, match="needs the tantivy package.*'fts5'"):
        SqliteMemoryIndex(path)


async def test_a_small_bank_is_fts5s_until_it_grows_large(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    answered = calls_of(monkeypatch, "rank")
    small, large = f"{unique_name}-small", f"{unique_name}-large"
    index = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=3, text_catch_up_s=0)
    try:
        await index.upsert([make_doc(small, "a", summary="kiwi orchard")])
        await index.upsert([make_doc(large, f"d{i}", summary=f"kiwi {i}") for i in range(2)])
        assert stored_state(path)["banks"] == {}  # nothing committed to tantivy for small banks
        assert await found(index, large, "kiwi") == [f"{large}-d0", f"{large}-d1"]
        assert [a is not None for a in answered] == [False]
        # The third document makes the bank large: all of it is indexed, from then on.
        await index.upsert([make_doc(large, "d2", summary="kiwi harvest")])
        assert set(stored_state(path)["banks"]) == {large}
        assert await found(index, large, "kiwi") == [f"{large}-d{i}" for i in range(3)]
        await index.upsert([make_doc(large, "d3", summary="kiwi jam")])
        assert await found(index, large, "jam") == [f"{large}-d3"]
        assert await found(index, small, "kiwi") == [f"{small}-a"]
        assert [a is not None for a in answered[1:]] == [True, True, False]
        # A large bank keeps its index when it shrinks again.
        await index.delete(large, f"{large}-d0")
        await index.delete(large, f"{large}-d1")
        assert set(stored_state(path)["banks"]) == {large}
        assert await found(index, large, "kiwi") == [f"{large}-d2", f"{large}-d3"]
        assert answered[-1] is not None
    finally:
        await index.close()


async def test_a_lost_store_is_rebuilt_for_the_large_banks_only(
    path: Path, unique_name: str
) -> None:
    small, large = f"{unique_name}-small", f"{unique_name}-large"
    index = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=2, text_catch_up_s=0)
    await index.upsert([make_doc(small, "a", summary="copper kettle")])
    await index.upsert([make_doc(large, f"d{i}", summary="copper pot") for i in range(2)])
    await index.close()
    root = text_root(str(path))
    assert root is not None
    shutil.rmtree(root)
    reopened = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=2, text_catch_up_s=0)
    try:
        assert await found(reopened, small, "copper") == [f"{small}-a"]
        assert set(stored_state(path)["banks"]) == {large}
        assert await found(reopened, large, "pot") == [f"{large}-d0", f"{large}-d1"]
    finally:
        await reopened.close()


def test_a_negative_large_bank_is_a_configuration_error(path: Path) -> None:
    from cogsub.core import ConfigurationError

    with pytest.raises(ConfigurationError, match="large_bank must not be negative"):
        SqliteMemoryIndex(path, text_engine="tantivy", large_bank=-1)


async def test_a_bank_grown_by_two_writers_is_indexed_when_it_reaches_the_size(
    path: Path, unique_name: str
) -> None:
    """Each writer counts a bank's rows it saw; the other's rows must not be missed."""
    first = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=3, text_catch_up_s=0)
    second = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=3, text_catch_up_s=0)
    try:
        await first.upsert([make_doc(unique_name, "a", summary="plum")])
        await second.upsert([make_doc(unique_name, "b", summary="plum")])
        assert stored_state(path)["banks"] == {}
        await first.upsert([make_doc(unique_name, "c", summary="plum tart")])
        assert set(stored_state(path)["banks"]) == {unique_name}
        assert await found(second, unique_name, "plum") == [
            f"{unique_name}-{name}" for name in "abc"
        ]
    finally:
        await first.close()
        await second.close()


async def test_with_no_bank_indexed_the_state_file_is_written_at_most_once_a_second(
    path: Path, unique_name: str
) -> None:
    index = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=4, text_catch_up_s=0)
    try:
        await index.upsert([make_doc(unique_name, "a", summary="fig")])
        saved = stored_state(path)["seq"]  # the first catch-up after open
        await index.upsert([make_doc(unique_name, "b", summary="fig")])
        await index.update(unique_name, f"{unique_name}-a", DocumentPatch(importance_score=0.9))
        assert stored_state(path)["seq"] == saved  # kept in memory meanwhile
        assert await found(index, unique_name, "fig") == [f"{unique_name}-a", f"{unique_name}-b"]
    finally:
        await index.close()
    # Another instance reads the rows since the file's seq again; the bank grows large there.
    reopened = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=4, text_catch_up_s=0)
    try:
        await reopened.upsert([make_doc(unique_name, f"c{i}", summary="fig jam") for i in range(2)])
        assert set(stored_state(path)["banks"]) == {unique_name}
        assert stored_state(path)["seq"] > saved
        assert len(await found(reopened, unique_name, "fig")) == 4
    finally:
        await reopened.close()


async def test_signal_writes_keep_a_small_banks_size_without_counting_it_again(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted: list[str] = []
    large = TantivyText._large

    def spied(self: TantivyText, conn: object, bank_id: str, written: int) -> bool:
        before = dict(self._sizes)  # noqa: SLF001
        answer = large(self, conn, bank_id, written)  # type: ignore[arg-type]
        if before.get(bank_id) is None or before[bank_id] + written >= self._large_bank:  # noqa: SLF001
            counted.append(bank_id)
        return answer

    monkeypatch.setattr(TantivyText, "_large", spied)
    index = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=100, text_catch_up_s=0)
    try:
        for i in range(4):
            await index.upsert([make_doc(unique_name, f"d{i}")])
            await index.update(
                unique_name, f"{unique_name}-d0", DocumentPatch(importance_score=0.9)
            )
        assert counted == [unique_name]  # once, at the first write
    finally:
        await index.close()


async def test_another_instance_searches_a_bank_through_tantivy_once_it_grew_large(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    writing = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=3, text_catch_up_s=0)
    reading = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=3, text_catch_up_s=0)
    try:
        await writing.upsert([make_doc(unique_name, f"d{i}", summary="pear") for i in range(2)])
        answered = calls_of(monkeypatch, "rank")
        assert len(await found(reading, unique_name, "pear")) == 2
        await writing.upsert([make_doc(unique_name, "d2", summary="pear cider")])
        assert await found(reading, unique_name, "pear") == [
            f"{unique_name}-d{i}" for i in range(3)
        ]
        assert await found(reading, unique_name, "cider") == [f"{unique_name}-d2"]
        assert [a is not None for a in answered] == [False, True, True]
    finally:
        await writing.close()
        await reading.close()
