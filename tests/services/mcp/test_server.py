"""The MCP server itself, over in-memory streams: a failing call is a tool error, not a crash."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
from mcp import ClientSession
from mcp.shared.memory import create_client_server_memory_streams

from cogsub.mcp import build_server
from cogsub.sdk import AsyncMemoryClient
from tests.services.mcp.conftest import failed


class _BrokenTransport(httpx.AsyncBaseTransport):
    """Fails the way a bug would: an exception that is no error of the project's."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise RuntimeError("a bug somewhere below the tool")


class _BrokenCallers:
    def pinned_bank(self, request: Any | None) -> str | None:
        return None

    def several_banks(self, request: Any | None) -> bool:
        return True

    @contextlib.asynccontextmanager
    async def client(self, request: Any | None) -> AsyncIterator[AsyncMemoryClient]:
        async with AsyncMemoryClient("http://broken", transport=_BrokenTransport()) as client:
            yield client


async def test_a_failing_tool_is_a_tool_error_and_the_server_goes_on():
    server = build_server(_BrokenCallers())
    async with (
        create_client_server_memory_streams() as (client_streams, server_streams),
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(server.run, *server_streams, server.create_initialization_options())
        async with ClientSession(*client_streams) as session:
            await session.initialize()
            result = await session.call_tool("recall", {"bank_id": "b", "query": "q"})
            error = failed(result, "internal")
            assert "see the server log" in error["message"]
            assert "a bug somewhere" not in error["message"]  # the details stay in the log
            assert len((await session.list_tools()).tools) > 1  # still serving
        tasks.cancel_scope.cancel()
