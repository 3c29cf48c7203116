"""A standalone ``/metrics`` endpoint for processes without an HTTP API (workers).

prometheus_client's own server runs in a daemon thread, so a scrape is answered
even while the event loop is busy, and nothing of it runs on the loop.
"""

from __future__ import annotations

import asyncio
import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client.exposition import start_http_server

from cogsub.core.errors import ConfigurationError
from cogsub.telemetry.metrics import Metrics

DEFAULT_METRICS_HOST = "127.0.0.1"
DEFAULT_METRICS_PORT = 9464


class MetricsServer:
    """A running metrics endpoint; ``stop`` (or ``aclose``) shuts it down and frees the port."""

    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        self._stopped = False

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was asked for)."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Where the exposition is served."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def stop(self) -> None:
        """Stop serving and close the socket (blocks up to half a second; idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    async def aclose(self) -> None:
        """``stop`` off the event loop."""
        await asyncio.to_thread(self.stop)


def serve_metrics(
    metrics: Metrics, *, host: str = DEFAULT_METRICS_HOST, port: int = DEFAULT_METRICS_PORT
) -> MetricsServer:
    """Serve ``metrics`` at ``http://host:port/metrics`` until the handle is stopped.

    Loopback by default; a container that Prometheus scrapes sets ``host="0.0.0.0"``.
    ``port=0`` binds a free port (tests); whether a process serves at all is the
    entrypoint's decision.

    Raises:
        ConfigurationError: the address cannot be bound (in use, not local, refused).
    """
    try:
        server, thread = start_http_server(port, addr=host, registry=metrics.exposed)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}"
        ) from None
    return MetricsServer(server, thread)
