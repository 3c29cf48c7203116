"""Serving an app with uvicorn inside an event loop the caller already runs.

The caller owns the process: signals stay with it (uvicorn's own handlers are
not installed), and ``stop`` ends the server gracefully (in-flight requests
finish, up to ``graceful_timeout_s``) so it can shut down together with the
ingestion worker. The socket is bound before the server starts, so a taken
port is a clear ConfigurationError rather than uvicorn exiting the process.

Given a :class:`HostGuard`, the server answers other ``Host`` values with a
JSON 421 before the app sees them. It belongs here, not in the app: only a
socket can be reached from a browser, and in-process clients use other names.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from cogsub.api.auth import HostGuard
from cogsub.api.errors import error_response
from cogsub.core.errors import ConfigurationError, FieldProblem

MISDIRECTED = 421
ALLOWED_HOSTS_SETTING = "COGSUB_API__ALLOWED_HOSTS"
_SHOWN_HOST_CHARS = 100


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the process's own handlers decide when to stop

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigurationError(
            f"cannot listen on {host}:{port} ({exc.strerror}); "
            "choose another with COGSUB_API__PORT or --port"
        ) from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


class HostGuardMiddleware:
    """Answers only requests whose ``Host`` the guard admits; the rest get a JSON 421."""

    def __init__(self, app: ASGIApp, *, guard: HostGuard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = Headers(scope=scope).getlist("host")
        host = sent[0] if len(sent) == 1 else None
        if len(sent) <= 1 and self.guard.admits(host):
            await self.app(scope, receive, send)
            return
        await _refuse_host(_described(sent), scope, receive, send)


def _described(sent: list[str]) -> str:
    if not sent:
        return "no Host header"
    if len(sent) > 1:
        return f"{len(sent)} Host headers"
    return f"Host {sent[0][:_SHOWN_HOST_CHARS]!r}"


async def _refuse_host(shown: str, scope: Scope, receive: Receive, send: Send) -> None:
    rule = (
        "must be a loopback name or address (localhost, 127.0.0.1, [::1]) "
        f"or listed in {ALLOWED_HOSTS_SETTING}"
    )
    response = error_response(
        MISDIRECTED,
        "misdirected_request",
        f"{shown} refused: without API keys this API answers only loopback names, so that "
        "a web page cannot reach it through a name pointed at this machine (DNS rebinding). "
        f"""To serve another name, list it in {ALLOWED_HOSTS_SETTING} (e.g. '["myhost.lan"]') """
        "or configure API keys.",
        [FieldProblem("Host", rule)],
    )
    await response(scope, receive, send)


class ApiServer:
    """One uvicorn server for ``app`` on ``host:port``; ``start``, then ``stop``.

    ``host_guard`` (see :meth:`HostGuard.for_api`): the ``Host`` values answered; None: all.
    """

    def __init__(
        self,
        app: FastAPI,
        *,
        host: str,
        port: int,
        graceful_timeout_s: float = 5.0,
        host_guard: HostGuard | None = None,
    ) -> None:
        self._app: ASGIApp = (
            app if host_guard is None else HostGuardMiddleware(app, guard=host_guard)
        )
        self._host = host
        self._port = port
        self._graceful_timeout_s = graceful_timeout_s
        self._socket: socket.socket | None = None
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """The base URL clients use (the bound port when 0 was asked for)."""
        if self._socket is None:
            raise RuntimeError("the server is not started")
        port = self._socket.getsockname()[1]
        host = "127.0.0.1" if self._host in ("0.0.0.0", "") else self._host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}"

    @property
    def task(self) -> asyncio.Task[None]:
        """The serving task; it ends when the server stops (or fails)."""
        if self._task is None:
            raise RuntimeError("the server is not started")
        return self._task

    async def start(self) -> None:
        """Bind, start serving and return once the server accepts connections."""
        self._socket = bind(self._host, self._port)
        config = uvicorn.Config(
            self._app,
            host=self._host,
            port=self._socket.getsockname()[1],
            lifespan="on",  # the app's lifespan runs the MCP session manager (cogsub.mcp)
            log_config=None,
            access_log=False,  # paths name banks and memories; keep them out of default logs
            timeout_graceful_shutdown=math.ceil(self._graceful_timeout_s),
        )
        self._server = _Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]))
        ready = asyncio.create_task(self._server.ready.wait())
        await asyncio.wait({ready, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            ready.cancel()
            await self.stop()
            raise ConfigurationError("the API server failed to start; see the log")

    async def stop(self) -> None:
        """Stop accepting, let in-flight requests finish, and close the socket (idempotent)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
        if self._socket is not None:
            self._socket.close()
