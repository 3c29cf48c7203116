"""A forget through the running app reaches recall's cache of archived texts at once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from cogsub.runtime.wiring import embedded_settings, running_api

BANK = "vault"
WHEN = "2026-03-01T09:00:00Z"
OLD = "The vault code is 4471 and only Priya knows it."
NEW = "The vault code was reset and Priya no longer knows it."


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = embedded_settings(tmp_path, embedder="hash")
    async with running_api(settings, with_worker=True, consolidating=False) as running:
        transport = httpx.ASGITransport(app=running.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client


async def _retain(api: httpx.AsyncClient, content: str) -> None:
    body = {"content": content, "memory_id": "code", "timestamp": WHEN, "wait": True}
    response = await api.post(f"/v1/banks/{BANK}/memories", json=body)
    assert response.status_code in (200, 201), response.text
    assert response.json()["recallable"] is True


async def _recalled(api: httpx.AsyncClient) -> list[str]:
    response = await api.post(f"/v1/banks/{BANK}/recall", json={"query": "vault code Priya"})
    assert response.status_code == 200, response.text
    return [hit["text"] for hit in response.json()["results"]]


@pytest.mark.timeout(60)
async def test_recall_after_a_forget_never_returns_the_forgotten_text(
    api: httpx.AsyncClient,
) -> None:
    await _retain(api, OLD)
    assert await _recalled(api) == [OLD]  # now held in recall's archived-read cache
    forgotten = await api.delete(f"/v1/banks/{BANK}/memories/code")
    assert forgotten.status_code == 200, forgotten.text
    # The same id at the same time is the same archive key: only the forget's report to
    # the memory service keeps the old text from coming back under the new memory.
    await _retain(api, NEW)
    texts = await _recalled(api)
    assert texts == [NEW]
    assert not any("4471" in text for text in texts)
