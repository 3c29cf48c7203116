"""A retain that ingestion dead-letters raises a typed error, over HTTP and embedded."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from cogsub.archive.filesystem import FilesystemArchive
from cogsub.core.errors import ConflictError, InvalidInputError
from cogsub.runtime.wiring import embedded_settings
from cogsub.sdk import (
    MemoryClient,
    RejectedConflictError,
    RejectedError,
    RejectedInputError,
)
from cogsub.sdk._errors import error_for
from tests.libs.sdk.test_sync_client import KEY, live_server
from tests.services.api.rejections import WHEN, occupy_key

PROMPT_S = 5.0  # the service's wait timeout is 10 s: a rejection is known long before
CONTENT = "Invoice 7 is paid."


def _answer(kind: str, message: str, problems: list[dict[str, str]] | None = None) -> bytes:
    error = {"type": kind, "message": message, "problems": problems or []}
    return json.dumps({"error": error}).encode()


def test_a_rejected_answer_maps_to_the_typed_errors() -> None:
    conflict = error_for(409, _answer("rejected", "ingestion rejected it (conflict): taken"))
    assert isinstance(conflict, RejectedConflictError) and isinstance(conflict, ConflictError)
    assert str(conflict) == "ingestion rejected it (conflict): taken"

    problem = {"field": "(ingestion)", "rule": "invalid: bad embedding"}
    invalid = error_for(422, _answer("rejected", "ingestion rejected it", [problem]))
    assert isinstance(invalid, RejectedInputError) and isinstance(invalid, InvalidInputError)
    assert [(p.field, p.rule) for p in invalid.problems] == [("(ingestion)", problem["rule"])]
    assert str(invalid) == "ingestion rejected it"

    plain = error_for(409, _answer("conflict", "memory_id: already holds another"))
    assert isinstance(plain, ConflictError) and not isinstance(plain, RejectedError)


async def _occupy(data_dir: Path, bank: str, memory_id: str) -> None:
    archive = FilesystemArchive(embedded_settings(data_dir).archive_root)
    try:
        await occupy_key(archive, bank, memory_id, CONTENT)
    finally:
        await archive.close()


async def test_the_embedded_client_raises_the_rejection_promptly(
    data_dir: Path, unique_name: str
) -> None:
    await _occupy(data_dir, unique_name, "invoice-7")

    def retain() -> float:
        with MemoryClient.embedded(data_dir, embedder="hash") as cm:
            started = time.monotonic()
            with pytest.raises(RejectedConflictError) as caught:
                cm.retain(unique_name, CONTENT, timestamp=WHEN, memory_id="invoice-7", wait=True)
            assert "already archived" in str(caught.value)
            return time.monotonic() - started

    assert await asyncio.to_thread(retain) < PROMPT_S


async def test_the_http_client_raises_the_rejection_promptly(
    data_dir: Path, unique_name: str
) -> None:
    await _occupy(data_dir, unique_name, "invoice-7")

    def retain(url: str) -> float:
        with MemoryClient(url, api_key=KEY) as cm:
            started = time.monotonic()
            with pytest.raises(RejectedConflictError):
                cm.retain(unique_name, CONTENT, timestamp=WHEN, memory_id="invoice-7", wait=True)
            return time.monotonic() - started

    async with live_server(data_dir, banks=[unique_name]) as url:
        assert await asyncio.to_thread(retain, url) < PROMPT_S
