"""Drop the index, replay the archive, get the same recall answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from cogsub.archive.filesystem import FilesystemArchive
from cogsub.core.memory import RecallRequest, RetainRequest
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.replay import ReplayFilter, replay
from tests.services.recall.stack import live_stack

FACTS = [
    ("jane", "Acme HQ is in Berlin."),
    ("jane", "Jane owns the billing service."),
    ("jane", "Billing deploys need the pod drained before restart."),
    ("jane", "The metrics volume filled up overnight."),
    ("bob", "Bob prefers tea over coffee."),
    ("bob", "Bob's team ships the search service on Tuesdays."),
]
QUERIES = [
    ("jane", "where is Acme HQ?"),
    ("jane", "billing deploy"),
    ("bob", "what does Bob drink"),
]


def _drop_index(root: Path) -> None:
    for path in root.glob("index.sqlite3*"):
        path.unlink()


async def _answers(root: Path) -> list[list[str]]:
    async with live_stack(root) as stack:
        found = []
        for bank, query in QUERIES:
            result = await stack.service.recall(
                bank, RecallRequest(query=query, k=3, reinforce=False)
            )
            found.append([hit.id for hit in result.results])
        return found


async def test_replay_rebuilds_an_index_that_answers_the_same(tmp_path: Path) -> None:
    async with live_stack(tmp_path) as stack:
        for bank, text in FACTS:
            await stack.service.retain(bank, RetainRequest(content=text, wait=True))
    before = await _answers(tmp_path)
    _drop_index(tmp_path)  # the associative layer is gone; the archive is the truth

    archive = FilesystemArchive(tmp_path / "archive")
    index = SqliteMemoryIndex(tmp_path / "index.sqlite3")
    try:
        report = await replay(archive, index)
        again = await replay(archive, index)  # idempotent
        assert report.indexed == again.indexed == len(FACTS)
        assert await index.count() == len(FACTS)
    finally:
        await index.close()
        await archive.close()
    assert await _answers(tmp_path) == before


async def test_replay_filters_by_bank_and_resumes_after_a_key(tmp_path: Path) -> None:
    async with live_stack(tmp_path) as stack:
        for bank, text in FACTS:
            await stack.service.retain(bank, RetainRequest(content=text, wait=True))
    _drop_index(tmp_path)
    archive = FilesystemArchive(tmp_path / "archive")
    index = SqliteMemoryIndex(tmp_path / "index.sqlite3")
    try:
        only_bob = await replay(archive, index, only=ReplayFilter(bank_id="bob"))
        assert only_bob.indexed == 2 and await index.count("jane") == 0
        keys = [key async for key in archive.list("events/")]
        resumed = await replay(archive, index, after_key=keys[2])
        assert resumed.scanned == len(keys) - 3
    finally:
        await index.close()
        await archive.close()


def test_the_replay_command_rebuilds_and_refuses_naive_dates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from cogsub.cli import main

    async def fill() -> None:
        async with live_stack(tmp_path) as stack:
            for bank, text in FACTS:
                await stack.service.retain(bank, RetainRequest(content=text, wait=True))

    asyncio.run(fill())
    _drop_index(tmp_path)
    assert (
        main(["--data-dir", str(tmp_path), "--embedder", "hash", "replay", "--bank", "jane"]) == 0
    )
    assert "replayed: 4 indexed, 6 archived objects scanned" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--data-dir", str(tmp_path), "replay", "--since", "2026-01-01"])
    assert "give a timezone" in capsys.readouterr().err
