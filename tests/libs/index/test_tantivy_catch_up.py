"""The tantivy arm caught up at most once per ``text_catch_up_s``: writes sooner than that
owe it, their rows are scored by FTS5 beside it meanwhile, and the next call once due pays it."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from cogsub.index.ports import DocumentPatch
from cogsub.index.sqlite.tantivy_search import _CHANGED_SINCE
from cogsub.index.sqlite.tantivy_text import (
    _BANK_CHANGED_AFTER,
    _BANKS_AFTER,
    _DELETED_AFTER,
    _ROWS_AFTER,
    TantivyText,
    text_root,
)
from tests.contract.index_contract import make_doc
from tests.libs.index.tantivy_store import calls_of, seqs, stored_state
from tests.libs.index.test_tantivy_text import documents_holding, found, opened


@pytest.fixture
def path(data_dir: Path) -> Path:
    return data_dir / "index.sqlite3"


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
        # Both banks stay tantivy's; the rows written since are scored by FTS5 beside it.
        assert await found(index, written, "kiln") == [f"{written}-late{n}" for n in range(3)]
        assert await found(index, written, "lantern") == [f"{written}-a"]
        assert await found(index, quiet, "amber") == [f"{quiet}-b"]
        assert None not in answered and len(answered) == 3
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
        reminder = index._db._catch_up_reminder  # reads alone are to pay it here
        assert reminder is not None
        reminder.cancel()
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


async def test_an_owed_catch_up_is_paid_when_due_in_one_commit_a_bank_with_no_call(
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
        for _ in range(200):  # no call at all: the reminder pays it once due
            if seqs(path)[1] == seqs(path)[0]:
                break
            await asyncio.sleep(0.05)
        sqlite_seq, store_seq = seqs(path)
        assert store_seq == sqlite_seq
        # However many writes owed it, each bank took one commit of all their rows.
        assert commits == [4, 4, 4]
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


async def test_a_failing_catch_up_is_tried_again_after_a_pause_not_on_every_write(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = opened(path, catch_up_s=0)
    attempts: list[int] = []

    def failing(self: TantivyText, conn: object) -> None:
        attempts.append(1)
        raise OSError("disk full")

    try:
        await index.upsert([make_doc(unique_name, "a", summary="amber")])
        monkeypatch.setattr(TantivyText, "catch_up", failing)
        for n in range(5):
            await index.upsert([make_doc(unique_name, f"x{n}", summary="kiln")])
        assert len(attempts) == 1  # then owed for a second, which these writes join
        assert await found(index, unique_name, "kiln") == [f"{unique_name}-x{n}" for n in range(5)]
    finally:
        monkeypatch.undo()
        await index.close()


async def test_signal_writes_beside_another_instances_debt_commit_once_an_interval(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    owing, serving = opened(path, catch_up_s=60), opened(path, catch_up_s=60)
    try:
        await owing.upsert([make_doc(unique_name, "a", summary="amber")])
        await owing.upsert([make_doc(unique_name, "b", summary="kiln")])  # owed by `owing`
        commits = commits_of(monkeypatch)
        patch = DocumentPatch(retrieval_count_increment=1)
        for n in range(5):  # recall feedback: signals only, the store never level
            await owing.upsert([make_doc(unique_name, f"c{n}", summary="kiln")])
            await serving.update(unique_name, f"{unique_name}-a", patch)
            if n == 1:
                paid = len(commits)  # serving's open caught up, then its first unlevel write
        assert len(commits) == paid
        kiln = [f"{unique_name}-b", *(f"{unique_name}-c{n}" for n in range(5))]
        assert await found(serving, unique_name, "kiln") == kiln
    finally:
        await owing.close()
        await serving.close()


@pytest.mark.parametrize(
    ("query", "parameters", "indexes"),
    [
        (_BANK_CHANGED_AFTER, (0, "b"), ["documents_by_seq", "tombstones_by_seq"]),
        (_BANKS_AFTER, (0,), ["documents_by_seq"]),
        (_ROWS_AFTER, (0, '["b"]'), ["documents_by_seq"]),
        (_DELETED_AFTER, (0,), ["tombstones_by_seq"]),
        (_CHANGED_SINCE, (0, "b", 10), ["documents_by_text_seq"]),
    ],
    ids=["bank changed", "banks written", "rows written", "banks deleted", "rows of a bank"],
)
def test_what_changed_since_is_read_by_the_seq_indexes_not_by_reading_banks(
    path: Path, query: str, parameters: tuple[object, ...], indexes: list[str]
) -> None:
    asyncio.run(_opened_and_closed(path))
    with sqlite3.connect(path) as conn:
        plan = " ".join(row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {query}", parameters))
    column = {"documents_by_text_seq": "text_seq"}
    assert all(f"INDEX {i} ({column.get(i, 'seq')}>?)" in plan for i in indexes), plan


async def _opened_and_closed(path: Path) -> None:
    index = opened(path, catch_up_s=0)
    await index.upsert([make_doc("b", "a")])
    await index.close()


def test_a_negative_interval_is_refused(path: Path) -> None:
    with pytest.raises(Exception, match="text_catch_up_s must not be negative"):
        opened(path, catch_up_s=-1)
