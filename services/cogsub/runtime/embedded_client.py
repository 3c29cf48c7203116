"""The embedded stack behind ``MemoryClient.embedded``: transports into an in-process API app.

The SDK is a library and never imports the services; it finds this module
through the ``cogsub.embedded`` entry point (``stack``, in ``pyproject.toml``)
and calls :func:`transport` or :func:`async_transport`, the two functions of
``cogsub.sdk.embedded.EmbeddedStack``.

``AsyncEmbeddedTransport`` starts the whole embedded stack (event log, archive,
index, embedder, ingestion worker, memory service, API app) on the running
loop at first use and sends each request through ``httpx.ASGITransport``, so an
embedded client and an HTTP client go through exactly the same app.

``EmbeddedTransport`` is its blocking twin: it runs the async transport on an
event loop of its own, on a background thread, and hands each request over to
it. It never touches the caller's event loop, so it works from any thread;
called from a coroutine it blocks that coroutine's loop until the answer
arrives, so coroutines should use ``AsyncEmbeddedTransport`` instead. A program
that never closes it has it closed at exit, before the interpreter stops the
thread pools the stack's stores run on.

Both log warnings and errors to stderr, unless the program configured structlog
itself (see ``configure_library_logging``): nothing reaches its standard output.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures.thread as futures_thread  # its exit hook goes in before ours
import contextlib
import threading
from collections.abc import Coroutine
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, Literal, TypeVar

import httpx
import structlog

from cogsub.runtime.settings import Settings
from cogsub.runtime.wiring import RunningApi, embedded_settings, running_api

log = structlog.get_logger("cogsub.sdk")

T = TypeVar("T")
START_TIMEOUT_S = 120.0  # loading the MiniLM model on a busy machine takes a while
_EMBEDDERS: dict[str, Literal["minilm", "hash", "openai"]] = {
    "minilm": "minilm",
    "hash": "hash",
    "openai": "openai",
}


def transport(data_dir: Path, embedder: str) -> httpx.BaseTransport:
    """A blocking transport into an embedded stack under ``data_dir``, started now."""
    return EmbeddedTransport(_settings(data_dir, embedder))


def async_transport(data_dir: Path, embedder: str) -> httpx.AsyncBaseTransport:
    """An async transport into an embedded stack under ``data_dir``, started on first use."""
    return AsyncEmbeddedTransport(_settings(data_dir, embedder))


def _settings(data_dir: Path, embedder: str) -> Settings:
    kind = _EMBEDDERS.get(embedder)
    if kind is None:
        raise ValueError(f"unknown embedder {embedder!r}: one of {', '.join(_EMBEDDERS)}")
    return embedded_settings(data_dir, embedder=kind)


class AsyncEmbeddedTransport(httpx.AsyncBaseTransport):
    """Serves requests from an embedded stack that it starts lazily and stops on ``aclose``."""

    def __init__(self, settings: Settings) -> None:
        # Imported here: importing the SDK loads nothing beyond the core types.
        from cogsub.telemetry.logging import configure_library_logging

        configure_library_logging()
        self._settings = settings
        self._lock = asyncio.Lock()
        self._exit = contextlib.AsyncExitStack()
        self._running: RunningApi | None = None
        self._asgi: httpx.ASGITransport | None = None
        self._closed = False
        self._reported: BaseException | None = None

    async def start(self) -> None:
        """Open and prepare the stack and start its worker (idempotent)."""
        async with self._lock:
            if self._closed:
                raise RuntimeError("the embedded stack of this client is closed")
            if self._running is not None:
                return
            running = await self._exit.enter_async_context(
                running_api(self._settings, with_worker=True)
            )
            self._asgi = httpx.ASGITransport(app=running.app)
            self._running = running

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` to the embedded app; a dead worker is reported, not hidden."""
        await self.start()
        assert self._running is not None and self._asgi is not None
        try:
            self._running.raise_if_worker_failed()
        except Exception as exc:
            self._reported = exc
            raise
        return await self._asgi.handle_async_request(request)

    async def aclose(self) -> None:
        """Stop the worker after the batches in hand, then close every adapter (idempotent)."""
        async with self._lock:
            self._closed = True
            self._running = None
            try:
                await self._exit.aclose()
            except Exception as exc:
                if exc is not self._reported:
                    raise  # a worker failure nobody has heard of yet


class EmbeddedTransport(httpx.BaseTransport):
    """Blocking transport over an embedded stack running on a private loop thread.

    The stack starts in the constructor, so a data directory another process
    holds fails here, at once. ``close`` stops it and joins the thread.
    """

    def __init__(self, settings: Settings, *, start_timeout_s: float = START_TIMEOUT_S) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="cogsub-embedded", daemon=True
        )
        self._thread.start()
        self._inner: AsyncEmbeddedTransport = self._call(_make_async(settings), timeout_s=10)
        self._closed = False
        try:
            self._call(self._inner.start(), timeout_s=start_timeout_s)
        except BaseException:
            self._stop_loop()
            raise
        _close_at_exit(self)

    def _call(self, coro: Coroutine[Any, Any, T], *, timeout_s: float | None) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("the embedded transport cannot be used from its own loop thread")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout:
            future.cancel()
            raise

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Run ``request`` on the stack's loop and return the whole answer."""
        if self._closed:
            raise RuntimeError("the embedded stack of this client is closed")
        body = request.read()
        timeouts = request.extensions.get("timeout", {})
        read_s = timeouts.get("read")
        copy = httpx.Request(request.method, request.url, headers=request.headers, content=body)

        async def roundtrip() -> tuple[int, list[tuple[bytes, bytes]], bytes]:
            response = await self._inner.handle_async_request(copy)
            content = await response.aread()
            return response.status_code, response.headers.raw, content

        try:
            status, headers, content = self._call(roundtrip(), timeout_s=read_s)
        except FutureTimeout as exc:
            raise httpx.ReadTimeout("the embedded stack did not answer in time") from exc
        return httpx.Response(status, headers=headers, content=content)

    def close(self) -> None:
        """Stop the embedded stack and its loop thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        _left_open.discard(self)
        try:
            self._call(self._inner.aclose(), timeout_s=START_TIMEOUT_S)
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


_left_open: set[EmbeddedTransport] = set()
_exit_hooked = False


def _close_at_exit(transport: EmbeddedTransport) -> None:
    """Close ``transport`` at exit if its program did not, while its stores still work.

    Plain ``atexit`` runs too late: by then the interpreter has shut down the
    thread pools the stores run on, and the worker's batch in hand fails
    ("cannot schedule new futures after shutdown"). Thread-exit hooks run
    before them, newest first, so the hook goes in after the pools' own.
    """
    global _exit_hooked
    _left_open.add(transport)
    if _exit_hooked:
        return
    register = getattr(threading, "_register_atexit", atexit.register)
    try:
        register(_close_left_open)
    except RuntimeError:  # the interpreter is exiting already: too late to hook
        return
    _exit_hooked = True


def _close_left_open() -> None:
    # The hook runs before the interpreter joins the program's own threads: a thread
    # still using the client after ``main`` returned must finish first.
    for thread in _program_threads():
        thread.join()
    for transport in list(_left_open):
        try:
            transport.close()
        except Exception:  # one client failing to close must not keep the others open
            log.warning("embedded_client_close_failed", exc_info=True)


def _program_threads() -> list[threading.Thread]:
    """Live non-daemon threads but this one and the thread pools' idle workers."""
    return [
        thread
        for thread in threading.enumerate()
        if thread is not threading.current_thread()
        and thread is not threading.main_thread()
        and not thread.daemon
        and getattr(thread, "_target", None) is not futures_thread._worker
    ]


async def _make_async(settings: Settings) -> AsyncEmbeddedTransport:
    # Created on the loop thread so its asyncio.Lock belongs to that loop.
    return AsyncEmbeddedTransport(settings)
