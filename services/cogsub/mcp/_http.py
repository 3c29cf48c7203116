"""The MCP server over streamable HTTP, mounted in the API app at ``/mcp`` and ``/mcp/{bank_id}``.

Each tool call goes back into the same app in-process (``httpx.ASGITransport``)
carrying the caller's own ``Authorization`` header, so the per-bank key check
is the API's own: a key that does not grant a bank gets exactly the API's 403,
handed to the host as a tool error. ``/mcp/{bank_id}`` pins every tool to that
bank and hides the ``bank_id`` argument.

The transport is stateless and answers in JSON: every request stands alone,
so any API replica of a fleet can serve any request and nothing is left open
when the server stops. Its own DNS-rebinding check is off because the API's
``HostGuard`` (in front of the whole app) already admits only the names the
API answers. The session manager runs inside the app's lifespan.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import httpx
from fastapi import FastAPI
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from cogsub.api.auth import ApiKeys, authorize_operator, banks_granted, bearer_key
from cogsub.api.errors import error_response
from cogsub.core.errors import AuthenticationError, PermissionDeniedError
from cogsub.sdk import AsyncMemoryClient

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

MCP_PATH = "/mcp"
PINNED_PATH = "/mcp/{bank_id}"
IN_PROCESS_URL = "http://mcp.cogsub"
MCP_ACTOR = "mcp"


class InProcessCallers:
    """Callers of an HTTP-mounted server: the bank in the path, the key in the header."""

    def __init__(self, app: FastAPI, keys: ApiKeys | None) -> None:
        self._app = app
        self._keys = keys

    def pinned_bank(self, request: Any | None) -> str | None:
        if not isinstance(request, Request):
            return None
        bank = request.path_params.get("bank_id")
        return bank if isinstance(bank, str) else None

    def several_banks(self, request: Any | None) -> bool:
        header = request.headers.get("authorization") if isinstance(request, Request) else None
        try:
            banks = banks_granted(self._keys, bearer_key(header))
        except AuthenticationError:
            return False
        return banks is None or len(banks) > 1  # None: every bank

    @contextlib.asynccontextmanager
    async def client(self, request: Any | None) -> AsyncIterator[AsyncMemoryClient]:
        header = request.headers.get("authorization") if isinstance(request, Request) else None
        transport = httpx.ASGITransport(app=self._app)
        async with AsyncMemoryClient(
            IN_PROCESS_URL, api_key=bearer_key(header), transport=transport, actor=MCP_ACTOR
        ) as client:
            yield client


class _Endpoint:
    """The ASGI endpoint of both paths: refuses an unknown key, then hands over to MCP."""

    def __init__(self, keys: ApiKeys | None) -> None:
        self.keys = keys
        self.manager: StreamableHTTPSessionManager | None = None  # set while the app runs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.manager is None:
            response = error_response(
                503, "unavailable", "the MCP endpoint is not running (the app's lifespan is off)"
            )
            await response(scope, receive, send)
            return
        if self.keys is not None:
            key = bearer_key(Request(scope).headers.get("authorization"))
            try:
                authorize_operator(self.keys, key)
            except AuthenticationError as exc:
                await error_response(401, "unauthenticated", str(exc))(scope, receive, send)
                return
            except PermissionDeniedError:
                pass  # a key for some banks: each tool call is checked against its bank
        await self.manager.handle_request(scope, receive, send)


def session_manager(app: FastAPI, keys: ApiKeys | None) -> StreamableHTTPSessionManager:
    """A session manager of the memory tools calling back into ``app`` (loads the MCP SDK)."""
    from cogsub.mcp._server import build_server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    return StreamableHTTPSessionManager(
        app=build_server(InProcessCallers(app, keys)),
        stateless=True,
        json_response=True,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )


def mount_mcp(app: FastAPI, *, keys: ApiKeys | None) -> None:
    """Serve the memory tools over streamable HTTP at ``/mcp`` and ``/mcp/{bank_id}``.

    The MCP SDK loads, and its session manager runs, only while the app's lifespan
    does: an app reached in-process (the embedded SDK client) never pays for it.
    """
    endpoint = _Endpoint(keys)
    app.router.routes.append(Route(MCP_PATH, endpoint, include_in_schema=False))
    app.router.routes.append(Route(PINNED_PATH, endpoint, include_in_schema=False))
    outer = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(running_app: Any) -> AsyncIterator[Any]:
        manager = session_manager(app, keys)  # one per run: a manager runs only once
        async with outer(running_app) as state, manager.run():
            endpoint.manager = manager
            try:
                yield state
            finally:
                endpoint.manager = None

    app.router.lifespan_context = lifespan
