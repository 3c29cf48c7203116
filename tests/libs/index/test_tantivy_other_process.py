"""The tantivy text arm follows another process's writes at once, with no write of its own.

The embedded deployment: ``cogsub ingest`` writes while ``cogsub serve`` recalls from the
same SQLite file. Each write here is made by a separate Python process.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cogsub.index.ports import SearchFilters
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.index.sqlite.tantivy_text import text_root
from tests.contract.index_contract import make_doc
from tests.libs.index.tantivy_store import calls_of, seqs

REPO = Path(__file__).resolve().parents[3]

_WRITER = """
import asyncio, os, sys
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.index.sqlite.tantivy_text import TantivyText
from tests.contract.index_contract import make_doc

async def main(path, action, bank, name, summary):
    index = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=0, text_catch_up_s=0)
    if action == "dies-after-sqlite":
        TantivyText.catch_up = lambda self, conn: os._exit(9)
    if action == "delete":
        await index.delete(bank, f"{bank}-{name}")
    else:
        await index.upsert([make_doc(bank, name, summary=summary)])
    await index.close()

asyncio.run(main(*sys.argv[1:]))
"""


@pytest.fixture
def path(data_dir: Path) -> Path:
    return data_dir / "index.sqlite3"


async def other_process(path: Path, action: str, bank: str, name: str, summary: str = "") -> int:
    """Run one write in a separate process; its exit code."""
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = await asyncio.to_thread(
        subprocess.run,  # killed by its timeout if it outlives it
        [sys.executable, "-c", _WRITER, str(path), action, bank, name, summary],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    return done.returncode


async def found(index: SqliteMemoryIndex, bank: str, query: str) -> list[str]:
    hits = await index.search_text(query, SearchFilters(bank_id=bank), size=50)
    return sorted(hit.document.event_id for hit in hits)


async def test_another_processs_writes_are_found_at_once_with_no_write_here(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    serving = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=0, text_catch_up_s=0)
    try:
        assert await found(serving, unique_name, "walnut") == []  # opened before the writes
        caught_up = calls_of(monkeypatch, "catch_up")
        ranked = calls_of(monkeypatch, "rank")
        first, second = f"{unique_name}-first", f"{unique_name}-second"
        assert await other_process(path, "upsert", unique_name, "first", "walnut grove") == 0
        assert await found(serving, unique_name, "walnut") == [first]
        # A bank this process already holds open: its searcher is reloaded.
        assert await other_process(path, "upsert", unique_name, "second", "walnut shells") == 0
        assert await found(serving, unique_name, "walnut") == [first, second]
        # A forget writes the bank into a new directory: the search follows it.
        assert await other_process(path, "delete", unique_name, "first") == 0
        assert await found(serving, unique_name, "walnut") == [second]
        assert await found(serving, unique_name, "grove") == []
        other_bank = f"{unique_name}b"
        assert await other_process(path, "upsert", other_bank, "third", "walnut bread") == 0
        assert await found(serving, other_bank, "walnut") == [f"{other_bank}-third"]
        assert caught_up == []  # this process wrote nothing and caught nothing up
        assert None not in ranked  # tantivy answered every search, not the FTS5 fallback
        assert len(ranked) == 5
    finally:
        await serving.close()


async def test_a_writer_dead_between_its_commits_leaves_searches_right(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    serving = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=0, text_catch_up_s=0)
    try:
        assert await other_process(path, "upsert", unique_name, "first", "walnut grove") == 0
        assert await found(serving, unique_name, "walnut") == [f"{unique_name}-first"]
        ranked = calls_of(monkeypatch, "rank")
        died = await other_process(path, "dies-after-sqlite", unique_name, "second", "walnut shell")
        assert died == 9
        sqlite_seq, store_seq = seqs(path)
        assert store_seq < sqlite_seq  # the store never heard of the second write
        both = [f"{unique_name}-first", f"{unique_name}-second"]
        assert await found(serving, unique_name, "walnut") == both
        assert await found(serving, unique_name, "shell") == [f"{unique_name}-second"]
        # tantivy answered, the row the store lacks scored by FTS5 beside it
        assert len(ranked) == 2 and None not in ranked
        # The next write of any process repairs the store; tantivy answers again.
        await serving.upsert([make_doc(f"{unique_name}b", "x", summary="pecan")])
        assert seqs(path)[1] == seqs(path)[0]
        assert await found(serving, unique_name, "walnut") == both
        assert ranked[-1] is not None
    finally:
        await serving.close()


async def test_a_search_with_nothing_new_reads_no_state_and_reloads_only_its_bank(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    banks = [f"{unique_name}{i}" for i in range(3)]
    writing = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=0, text_catch_up_s=0)
    # its own store state
    serving = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=0, text_catch_up_s=0)
    try:
        await writing.upsert([make_doc(bank, "a", summary="cedar") for bank in banks])
        assert await found(serving, banks[0], "cedar") == [f"{banks[0]}-a"]
        # The writing instance runs on its writer thread: only the searches' calls count.
        states = calls_of(monkeypatch, "_read_state", searches=True)
        reloads = calls_of(monkeypatch, "_reload", searches=True)
        for _ in range(20):
            assert await found(serving, banks[0], "cedar") == [f"{banks[0]}-a"]
        assert (states, reloads) == ([], [])  # one integer compare a search
        await writing.upsert([make_doc(bank, "b", summary="cedar") for bank in banks])
        for _ in range(3):
            assert await found(serving, banks[1], "cedar") == [f"{banks[1]}-a", f"{banks[1]}-b"]
        assert len(states) == 1  # read once, for the first search after the write
        assert len(reloads) == 1  # the searched bank only, once
    finally:
        await serving.close()
        await writing.close()


async def test_a_bank_whose_directory_failed_to_open_is_answered_by_fts5(
    path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    writing = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=0, text_catch_up_s=0)
    # its own store state
    serving = SqliteMemoryIndex(path, text_engine="tantivy", large_bank=0, text_catch_up_s=0)
    try:
        assert await found(serving, unique_name, "walnut") == []  # opened before the writes
        await writing.upsert([make_doc(unique_name, "first", summary="walnut grove")])
        # The state names a directory that is gone when this instance opens it, as when
        # another writer rebuilt the bank and removed it between the read and the open.
        root = text_root(str(path))
        assert root is not None
        state = json.loads((root / "state.json").read_text())
        state["banks"][unique_name] = "removed-before-open"
        (root / "state.json").write_text(json.dumps(state, sort_keys=True))
        ranked = calls_of(monkeypatch, "rank", searches=True)
        first, second = f"{unique_name}-first", f"{unique_name}-second"
        assert await found(serving, unique_name, "walnut") == [first]
        assert await found(serving, unique_name, "grove") == [first]  # retried, still gone
        assert ranked == [None, None]  # FTS5 answered, not an empty tantivy bank
        # The writer's next write rebuilds the bank it cannot open; tantivy answers again.
        await writing.upsert([make_doc(unique_name, "second", summary="walnut shells")])
        assert await found(serving, unique_name, "walnut") == [first, second]
        assert ranked[-1] is not None
    finally:
        await serving.close()
        await writing.close()
