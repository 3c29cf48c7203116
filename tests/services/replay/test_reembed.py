"""`cogsub replay --reembed`: a new index version, live only once complete."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from cogsub.cli.main import main
from cogsub.core.memory import RecallRequest, RetainRequest
from cogsub.embeddings.hash import HashEmbedder
from cogsub.index.sqlite import SqliteMemoryIndex
from tests.services.recall.stack import live_stack

TEXTS = ["Acme HQ is in Berlin.", "Jane owns the billing service.", "Bob prefers tea."]


async def _ids(root: Path, dimension: int) -> list[str]:
    async with live_stack(root, embedder=HashEmbedder(dimension=dimension)) as stack:
        found = await stack.service.recall(
            "jane", RecallRequest(query="who owns billing", k=3, reinforce=False)
        )
        return [h.id for h in found.results]


async def test_reembed_builds_a_new_version_and_switches_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with live_stack(tmp_path, embedder=HashEmbedder(dimension=8)) as stack:
        for i, text in enumerate(TEXTS):
            await stack.service.retain(
                "jane", RetainRequest(content=text, memory_id=f"m{i}", wait=True)
            )
    before = await _ids(tmp_path, 8)
    monkeypatch.setenv("COGSUB_EMBEDDER__HASH_DIMENSION", "16")
    argv = ["--data-dir", str(tmp_path), "--embedder", "hash", "replay", "--reembed", "hash"]
    code = await asyncio.to_thread(main, argv)
    assert code == 0
    index = SqliteMemoryIndex(tmp_path / "index.sqlite3")
    try:
        doc = await index.get("jane", "m1")
        assert doc is not None and len(doc.embedding) == 16
        assert await index.count("jane") == len(TEXTS)
    finally:
        await index.close()
    # no file of the version built is left beside the live index and its text store
    assert _index_files(tmp_path) == ["index.sqlite3", "index.text"]
    assert await _ids(tmp_path, 16) == before  # the same memories answer, now with 16-d vectors
    assert len(_archived(tmp_path, "m1")["input"]["embedding"]) == 8  # the archive stays as it was


def _index_files(root: Path) -> list[str]:
    return sorted(p.name for p in root.glob("index*"))


def _archived(root: Path, memory_id: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        next((root / "archive").rglob(f"{memory_id}.json")).read_text()
    )
    return found


def test_reembed_refuses_partial_rebuilds_and_a_served_directory(tmp_path: Path) -> None:
    assert main(["--data-dir", str(tmp_path), "replay", "--reembed", "hash", "--bank", "b"]) == 2
    (tmp_path / "api.json").write_text(
        json.dumps({"url": "http://127.0.0.1:1", "pid": os.getpid()})
    )
    assert main(["--data-dir", str(tmp_path), "replay", "--reembed", "hash"]) == 2
    assert not (tmp_path / "index.sqlite3").exists()
