"""Request limits, enforced before routing, authentication or parsing.

The body limit holds for a declared ``Content-Length`` (refused before a byte
is read) and for streamed bodies without one (refused as soon as the running
total passes the limit). Starlette ships a body limiter too, but it answers in
plain text on some paths and only once the app reads the body; this one
answers with the API's JSON error before the app runs at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cogsub.api.errors import error_response

DEFAULT_MAX_BODY_BYTES = 1_048_576


@dataclass(frozen=True)
class ApiLimits:
    """How much a request may carry, and how long readiness may take to answer."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    readiness_timeout_s: float = 2.0
    rate_limit_per_s: float | None = None
    rate_limit_burst: int = 100


class BodyLimitMiddleware:
    """Buffers each request body up to ``max_body_bytes``; anything larger gets a JSON 413."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left; there is no one to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # only http.disconnect is left to wait for
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413,
            "payload_too_large",
            f"the request body is larger than {self.max_body_bytes} bytes",
            # The rest of the body is never read, so the connection cannot be reused.
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)
