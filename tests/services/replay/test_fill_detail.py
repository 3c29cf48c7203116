"""`cogsub replay --fill-detail`: an older index's memories made searchable past their summary."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cogsub.archive.filesystem import FilesystemArchive
from cogsub.core.memory import RetainRequest
from cogsub.index.ports import DocumentPatch, SearchFilters
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.replay import ReplayFilter, fill_detail
from tests.services.recall.stack import live_stack

LONG = (
    "Release checklist for the billing service. "
    + "Check the changelog, the version and the dashboards. " * 5
    + "Last, drain the kubelet on every node before the restart."
)
MEMORIES = [("jane", LONG), ("jane", "Jane owns the billing service."), ("bob", LONG + " Bob's.")]


async def _retained(root: Path) -> dict[str, str]:
    """Each memory's id by its bank and text, retained through the service."""
    ids = {}
    async with live_stack(root) as stack:
        for bank, text in MEMORIES:
            result = await stack.service.retain(bank, RetainRequest(content=text, wait=True))
            ids[bank + text] = result.memory_id
    return ids


async def _as_indexed_before_detail(index: SqliteMemoryIndex, bank: str, memory_id: str) -> None:
    """The document as an older index held it (no detail), with usage signals of its own."""
    doc = await index.get(bank, memory_id)
    assert doc is not None and doc.detail
    await index.upsert([doc.model_copy(update={"detail": ""})])
    await index.update(bank, memory_id, DocumentPatch(retrieval_count=3, decay_factor=0.5))


async def _kubelet_hits(index: SqliteMemoryIndex, bank: str) -> list[str]:
    hits = await index.search_text("kubelet", SearchFilters(bank_id=bank), size=5)
    return [hit.document.event_id for hit in hits]


async def test_fill_detail_writes_only_the_detail_and_keeps_the_signals(tmp_path: Path) -> None:
    ids = await _retained(tmp_path)
    jane, bob = ids["jane" + LONG], ids["bob" + LONG + " Bob's."]
    archive = FilesystemArchive(tmp_path / "archive")
    index = SqliteMemoryIndex(tmp_path / "index.sqlite3")
    try:
        for bank, memory_id in (("jane", jane), ("bob", bob)):
            await _as_indexed_before_detail(index, bank, memory_id)
        assert await _kubelet_hits(index, "jane") == []

        only_jane = await fill_detail(archive, index, only=ReplayFilter(bank_id="jane"))
        assert only_jane.indexed == 1 and only_jane.scanned == len(MEMORIES)
        assert await _kubelet_hits(index, "jane") == [jane]
        assert await _kubelet_hits(index, "bob") == []  # not admitted: left as it was
        doc = await index.get("jane", jane)
        assert doc is not None and doc.detail.endswith("before the restart.")
        assert (doc.retrieval_count, doc.decay_factor) == (3, 0.5)

        everyone = await fill_detail(archive, index)
        assert everyone.indexed == 1 and await _kubelet_hits(index, "bob") == [bob]
        assert (await fill_detail(archive, index)).indexed == 0  # nothing left to fill
    finally:
        await index.close()
        await archive.close()


def test_the_command_fills_and_refuses_to_announce(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cogsub.cli import main

    ids = asyncio.run(_retained(tmp_path))

    async def strip() -> None:
        index = SqliteMemoryIndex(tmp_path / "index.sqlite3")
        try:
            await _as_indexed_before_detail(index, "jane", ids["jane" + LONG])
        finally:
            await index.close()

    asyncio.run(strip())
    args = ["--data-dir", str(tmp_path), "--embedder", "hash", "replay", "--fill-detail"]
    assert main(args) == 0
    assert "filled: 1 memories given their detail, 3 archived objects scanned" in (
        capsys.readouterr().out
    )
    assert main([*args, "--announce"]) == 2
    assert "--fill-detail goes alone" in capsys.readouterr().out
