"""The MCP server over stdio: what an MCP host starts with ``cogsub mcp``.

One client serves every call of the process, against a running API or an
embedded stack. While serving, the SDK points the process's standard output
at stderr, so only protocol messages reach the host; logs go to stderr.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import structlog

from cogsub.core.errors import CogsubError
from cogsub.mcp._server import build_server
from cogsub.sdk import AsyncMemoryClient
from mcp.server.stdio import stdio_server

log = structlog.get_logger("cogsub.mcp")


class ProcessCallers:
    """Callers of a stdio server: one client and, with ``--bank``, one bank for everything."""

    def __init__(
        self, client: AsyncMemoryClient, *, bank: str | None, several_banks: bool = True
    ) -> None:
        self._client = client
        self._bank = bank
        self._several_banks = several_banks

    @classmethod
    async def asking(cls, client: AsyncMemoryClient, *, bank: str | None) -> ProcessCallers:
        """Callers whose ``several_banks`` the API answered once, at start-up (unless pinned)."""
        several = bank is None and await may_use_several_banks(client)
        return cls(client, bank=bank, several_banks=several)

    def pinned_bank(self, request: Any | None) -> str | None:
        return self._bank

    def several_banks(self, request: Any | None) -> bool:
        return self._several_banks

    @contextlib.asynccontextmanager
    async def client(self, request: Any | None) -> AsyncIterator[AsyncMemoryClient]:
        yield self._client  # shared for the process; closed by whoever opened it


async def may_use_several_banks(client: AsyncMemoryClient) -> bool:
    """Whether ``client``'s caller may use more than one bank: the HTTP mount's rule, asked.

    The process has no key table, so it asks ``GET /v1/banks`` for a page of two:
    a keyless client that may list banks talks to an API without keys (every bank
    open); a keyed one reaches several when the page holds two. A ``"*"`` key over a
    store of one bank or none is told apart from a key of one bank only once a second
    bank exists (the tool would list just that one). A refused key offers no listing.
    """
    try:
        page = await client.list_banks(limit=2)
    except CogsubError as exc:
        log.warning("mcp_list_banks_refused", error_type=type(exc).__name__, error=str(exc))
        return False
    return not client.has_api_key or len(page.banks) > 1


async def serve_stdio(client: AsyncMemoryClient, *, bank: str | None) -> None:
    """Serve the memory tools on stdin/stdout until the host closes stdin."""
    server = build_server(await ProcessCallers.asking(client, bank=bank))
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
