"""The tantivy arm caught up at most once per ``text_catch_up_s``: writes sooner than that
owe it, their banks' searches are FTS5's meanwhile, and the next call once due pays it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from cogsub.index.ports import SearchFilters
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.index.sqlite.tantivy_text import TantivyText, text_root
from tests.contract.index_contract import make_doc
from tests.libs.index.tantivy_store import calls_of, seqs, stored_state
from tests.libs.index.test_tantivy_text import documents_holding


@pytest.fixture
def path(data_dir: Path) -> Path:
    return data_dir / "index.sqlite3"


def opened(path: Path, catch_up_s: float) -> SqliteMemoryIndex:
    return SqliteMemoryIndex(path, text_engine="tantivy", large_bank=0, text_catch_up_s=catch_up_s)


async def found(index: SqliteMemoryIndex, bank: str, query: str) -> list[str]:
    hits = await index.search_text(query, SearchFilters(bank_id=bank), size=50)
    return sorted(hit.document.event_id for hit in hits)


def commits_of(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per tantivy commit of a bank (``TantivyText._apply``), its row count."""
    commits: list[int] = []
    original = TantivyText._apply

    def counted(self: TantivyText, index: object, rows: list[object], *, replace: bool) -> None:
        commits.append(len(rows))
        original(self, index, rows, replace=replace)  # type: ignore[arg-type]

    monkeypatch.setattr(TantivyText, "_apply", counted)
    return commits


async def test_writes_sooner_than_the_interval_commit_nothing_and_lag_only_their_bank(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    written, quiet = f"{unique_name}-w", f"{unique_name}-q"
    index = opened(path, catch_up_s=60)
    try:
        # The first write after open catches up at once: both banks get an index.
        await index.upsert(
            [make_doc(written, "a", summary="amber lantern"), make_doc(quiet, "b", summary="amber")]
        )
        assert set(stored_state(path)["banks"]) == {written, quiet}
        commits = commits_of(monkeypatch)
        answered = calls_of(monkeypatch, "rank", searches=True)
        for n in range(3):
            await index.upsert([make_doc(written, f"late{n}", summary=f"amber kiln {n}")])
        assert commits == []  # owed, not paid
        sqlite_seq, store_seq = seqs(path)
        assert store_seq < sqlite_seq
        # The written bank is FTS5's meanwhile, with every write; the other stays tantivy's.
        assert await found(index, written, "kiln") == [f"{written}-late{n}" for n in range(3)]
        assert answered == [None]
        assert await found(index, quiet, "amber") == [f"{quiet}-b"]
        assert answered[1] is not None
    finally:
        await index.close()


async def test_an_owed_catch_up_is_paid_by_a_read_once_it_falls_due(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = opened(path, catch_up_s=2.0)
    try:
        await index.upsert([make_doc(unique_name, "a", summary="amber lantern")])
        await index.upsert([make_doc(unique_name, "b", summary="amber kiln")])
        sqlite_seq, store_seq = seqs(path)
        assert store_seq < sqlite_seq  # owed
        answered = calls_of(monkeypatch, "rank", searches=True)
        deadline = time.monotonic() + 10
        while True:  # searches only: each queues the catch-up once it is due
            assert await found(index, unique_name, "kiln") == [f"{unique_name}-b"]
            sqlite_seq, store_seq = seqs(path)
            if store_seq == sqlite_seq or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        assert store_seq == sqlite_seq
        assert await found(index, unique_name, "kiln") == [f"{unique_name}-b"]
        assert answered[-1] is not None  # tantivy answers the bank again
    finally:
        await index.close()


async def test_a_write_once_due_pays_the_owed_catch_up_in_one_commit_a_bank(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    banks = [f"{unique_name}-{n}" for n in range(3)]
    index = opened(path, catch_up_s=2.0)
    try:
        await index.upsert([make_doc(bank, "a", summary="amber") for bank in banks])
        commits = commits_of(monkeypatch)
        for n in range(4):
            await index.upsert([make_doc(bank, f"x{n}", summary="kiln") for bank in banks])
        assert commits == []
        await asyncio.sleep(2.05)
        await index.upsert([make_doc(bank, "last", summary="kiln") for bank in banks])
        # However many writes it owed, each bank took one commit of all their rows.
        assert commits == [5, 5, 5]
        sqlite_seq, store_seq = seqs(path)
        assert store_seq == sqlite_seq
    finally:
        await index.close()


async def test_a_forget_catches_up_at_once_whatever_is_owed(path: Path, unique_name: str) -> None:
    index = opened(path, catch_up_s=60)
    try:
        await index.upsert([make_doc(unique_name, "other", summary="ordinary zebrawood")])
        await index.upsert([make_doc(unique_name, "secret", summary="quixotically zebrawood")])
        root = text_root(str(path))
        assert root is not None
        await index.delete(unique_name, f"{unique_name}-secret")
        assert documents_holding(root, "summary", "quixot") == 0
        assert seqs(path)[1] == seqs(path)[0]
        assert await found(index, unique_name, "zebrawood") == [f"{unique_name}-other"]
    finally:
        await index.close()


async def test_closing_pays_what_is_owed_so_other_processes_need_not_wait(
    path: Path, unique_name: str
) -> None:
    index = opened(path, catch_up_s=60)
    await index.upsert([make_doc(unique_name, "a", summary="amber lantern")])
    await index.upsert([make_doc(unique_name, "b", summary="amber kiln")])
    sqlite_seq, store_seq = seqs(path)
    assert store_seq < sqlite_seq
    await index.close()
    assert seqs(path) == (sqlite_seq, sqlite_seq)


def test_a_negative_interval_is_refused(path: Path) -> None:
    with pytest.raises(Exception, match="text_catch_up_s must not be negative"):
        opened(path, catch_up_s=-1)
