"""The MCP server over stdio: what an MCP host starts with ``cogsub mcp``.

One client serves every call of the process, against a running API or an
embedded stack. While serving, the SDK points the process's standard output
at stderr, so only protocol messages reach the host; logs go to stderr.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from cogsub.mcp._server import build_server
from cogsub.sdk import AsyncMemoryClient
from mcp.server.stdio import stdio_server


class ProcessCallers:
    """Callers of a stdio server: one client and, with ``--bank``, one bank for everything."""

    def __init__(self, client: AsyncMemoryClient, *, bank: str | None) -> None:
        self._client = client
        self._bank = bank

    def pinned_bank(self, request: Any | None) -> str | None:
        return self._bank

    def several_banks(self, request: Any | None) -> bool:
        return True  # what the key grants is the API's to say; list_banks asks it

    @contextlib.asynccontextmanager
    async def client(self, request: Any | None) -> AsyncIterator[AsyncMemoryClient]:
        yield self._client  # shared for the process; closed by whoever opened it


async def serve_stdio(client: AsyncMemoryClient, *, bank: str | None) -> None:
    """Serve the memory tools on stdin/stdout until the host closes stdin."""
    server = build_server(ProcessCallers(client, bank=bank))
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
