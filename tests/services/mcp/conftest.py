"""MCP clients (the official ``mcp.ClientSession``) of the real API app over a live stack."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from cogsub.api import ApiKeys, ApiLimits, create_app
from cogsub.embeddings.hash import HashEmbedder
from cogsub.lifecycle import Lifecycle
from tests.services.recall.stack import LiveStack, live_stack

KEY_A = "mcp-key-for-bank-a-0123456789"
KEY_ALL = "mcp-key-for-every-bank-0123456789"
HASH_DIMENSION = HashEmbedder().dimension


@pytest.fixture
async def stack(data_dir: Path) -> AsyncIterator[LiveStack]:
    async with live_stack(data_dir) as running:
        yield running


@pytest.fixture
def banks(unique_name: str) -> tuple[str, str]:
    return f"{unique_name}-a", f"{unique_name}-b"


@contextlib.asynccontextmanager
async def running_app(stack: LiveStack, banks: tuple[str, str]) -> AsyncIterator[FastAPI]:
    """The API app with keys (A: bank A only; ALL: every bank), its lifespan running.

    A context manager, not a fixture: the lifespan's task group must end in the task
    that started it, and pytest-asyncio tears fixtures down in another one.
    """
    keys = ApiKeys({KEY_A: [banks[0]], KEY_ALL: ["*"]})
    lifecycle = Lifecycle(archive=stack.archive, index=stack.index, dimension=HASH_DIMENSION)
    built = create_app(service=stack.service, auth=keys, limits=ApiLimits(), lifecycle=lifecycle)
    async with built.router.lifespan_context(built):
        yield built


@contextlib.asynccontextmanager
async def http_session(
    base_url: str, path: str, key: str | None, transport: Any = None
) -> AsyncIterator[ClientSession]:
    """An initialized MCP session over streamable HTTP at ``base_url + path``."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(transport=transport, headers=headers, timeout=30) as http,
        streamable_http_client(f"{base_url}{path}", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def structured(result: CallToolResult) -> dict[str, Any]:
    """The tool's structured answer; the text content is the same JSON (or the block)."""
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


def succeeded(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    body = structured(result)
    text = result.content[0].text  # type: ignore[union-attr]
    if "format" not in body or body.get("format") == "json":
        assert json.loads(text) == body
    return body


def failed(result: CallToolResult, kind: str) -> dict[str, Any]:
    assert result.is_error is True, result
    error = structured(result)["error"]
    assert error["type"] == kind, error
    return error  # type: ignore[no-any-return]
