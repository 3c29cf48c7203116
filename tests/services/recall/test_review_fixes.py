"""Retain with a client-chosen id: retries are idempotent, other content is a clear conflict;
recall survives a missing archive object."""

from __future__ import annotations

from pathlib import Path

import pytest

from cogsub.core import ConflictError
from cogsub.core.memory import RecallRequest, RetainRequest
from tests.services.recall.stack import live_stack


async def test_a_retry_with_the_same_id_and_content_is_idempotent(tmp_path: Path) -> None:
    async with live_stack(tmp_path) as stack:
        first = await stack.service.retain(
            "bank-a", RetainRequest(content="Acme HQ is in Berlin.", memory_id="m-1", wait=True)
        )
        again = await stack.service.retain(
            "bank-a", RetainRequest(content="Acme HQ is in Berlin.", memory_id="m-1", wait=True)
        )
        assert first.recallable and again.recallable
        assert again.object_storage_key == first.object_storage_key
        assert await stack.index.count("bank-a") == 1


async def test_the_same_id_with_other_content_is_refused(tmp_path: Path) -> None:
    async with live_stack(tmp_path) as stack:
        await stack.service.retain(
            "bank-a", RetainRequest(content="Acme HQ is in Berlin.", memory_id="m-1", wait=True)
        )
        with pytest.raises(ConflictError, match="memory_id"):
            await stack.service.retain(
                "bank-a", RetainRequest(content="Acme HQ is in Paris.", memory_id="m-1", wait=True)
            )
        found = await stack.service.recall("bank-a", RecallRequest(query="Acme HQ"))
        assert [h.text for h in found.results] == ["Acme HQ is in Berlin."]


async def test_recall_skips_a_memory_whose_archive_object_is_gone(tmp_path: Path) -> None:
    async with live_stack(tmp_path) as stack:
        kept = await stack.service.retain(
            "bank-a", RetainRequest(content="billing deploys on Fridays", wait=True)
        )
        lost = await stack.service.retain(
            "bank-a", RetainRequest(content="billing deploys need a drained pod", wait=True)
        )
        (tmp_path / "archive" / lost.object_storage_key).unlink()
        found = await stack.service.recall("bank-a", RecallRequest(query="billing deploys"))
        assert [h.id for h in found.results] == [kept.memory_id]
