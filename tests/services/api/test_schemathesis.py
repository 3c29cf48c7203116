"""schemathesis against the served OpenAPI document, in process, over a live embedded stack.

The document is the one the app serves at ``/openapi.json``; schemathesis
generates requests for every operation from it (valid ones and, in its
negative mode, ones that break the schema) and sends them to the ASGI app
without a network. Each answer must be below 500 (503 included: nothing here
is down), documented for its operation (status, content type, headers, body
schema), and every 4xx must be the API's JSON error with a message.

schemathesis runs every ASGI app on one event loop thread of its own, so the
stack is opened there: :class:`StackApp` opens it at lifespan startup and closes
it at shutdown. Its pytest plugin ends the lifespan after every test, so each
test's first request opens the stack again, over the same directory.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import CheckContext, not_a_server_error
from schemathesis.core.failures import Failure
from schemathesis.core.transport import Response
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from starlette.types import Receive, Scope, Send

from cogsub.api import ApiLimits, create_app
from cogsub.api.lifecycle import JSON_LINES
from cogsub.archive.filesystem import FilesystemArchive
from cogsub.consolidation import ConsolidationRound, DerivedWriter
from cogsub.core.topics import CONSOLIDATION_TOPICS
from cogsub.deadletters.desk import DeadLetterDesk
from cogsub.embeddings.hash import HashEmbedder
from cogsub.lifecycle import Lifecycle
from cogsub.recall import MemoryService
from tests.services.recall.stack import live_stack

pytestmark = pytest.mark.slow

EXAMPLES_PER_OPERATION = 25


class StackApp:
    """The memory API over a live embedded stack opened on the loop that serves it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.app: FastAPI | None = None
        self._opened: contextlib.AsyncExitStack | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        assert self.app is not None, "the lifespan did not start"
        await self.app(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._opened = contextlib.AsyncExitStack()
                self.app = await self._open(self._opened)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                opened, self._opened, self.app = self._opened, None, None
                if opened is not None:
                    await opened.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _open(self, opened: contextlib.AsyncExitStack) -> FastAPI:
        stack = await opened.enter_async_context(live_stack(self.root))
        archive = FilesystemArchive(self.root / "archive")
        opened.push_async_callback(archive.close)
        # A short wait: a generated retain may never turn recallable (an id in two banks).
        service = MemoryService(
            bus=stack.bus,
            archive=archive,
            index=stack.index,
            embedder=HashEmbedder(),
            wait_timeout_s=0.5,
        )
        opened.push_async_callback(service.drain)
        await stack.bus.ensure_topics(CONSOLIDATION_TOPICS)
        writer = DerivedWriter(
            bus=stack.bus, archive=archive, index=stack.index, embedder=HashEmbedder()
        )
        rounds = ConsolidationRound(archive=archive, index=stack.index, writer=writer)
        return create_app(
            service=service,
            auth=None,  # open, as on loopback: requests reach the routes, not only the key check
            limits=ApiLimits(max_body_bytes=65_536),
            readiness={"index": lambda: stack.index.count("schemathesis-readiness")},
            consolidate=rounds.run,
            lifecycle=Lifecycle(archive=archive, index=stack.index),
            dead_letter_desk=DeadLetterDesk(stack.bus),
        )


@pytest.fixture(scope="module")
def served_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The schema as ``GET /openapi.json`` serves it, bound to the app (ASGI, no network)."""
    app = StackApp(tmp_path_factory.mktemp("schemathesis"))
    try:
        yield schemathesis.openapi.from_asgi("/openapi.json", app)
    finally:
        asgi.shutdown_lifespans()  # (the plugin did already, after the test) on its own loop


def errors_are_json_with_a_message(
    ctx: CheckContext, response: Response, case: schemathesis.Case[Any]
) -> bool | None:
    """Every 4xx is ``{"error": {"type", "message", "problems"}}`` with a message."""
    if not 400 <= response.status_code < 500:
        return None
    title = f"{response.status_code} is not the API's JSON error"
    try:
        body = response.json()
    except ValueError:
        raise Failure(operation=case.operation.label, title=title, message=response.text) from None
    error = body.get("error") if isinstance(body, dict) else None
    if not (
        isinstance(error, dict)
        and isinstance(error.get("type"), str)
        and isinstance(error.get("message"), str)
        and error["message"]
        and isinstance(error.get("problems"), list)
    ):
        raise Failure(operation=case.operation.label, title=title, message=response.text)
    return True


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    errors_are_json_with_a_message,
]

# The operations, from the app's own document, to give each its own test id. (The
# schema the cases come from is the served one; schemathesis' own pytest loader for a
# schema in a fixture cannot run on pytest 9: it sets ``Function._nodeid``.)
_DOCUMENT = create_app(service=None, auth=None, limits=ApiLimits()).openapi()  # type: ignore[arg-type]
CASES = [
    pytest.param(method.upper(), path, mode, id=f"{method.upper()} {path} {mode.value}")
    for path, item in _DOCUMENT["paths"].items()
    for method, spec in item.items()
    for mode in GenerationMode
    # Negative cases break a parameter or the body; an operation with neither has none.
    if mode is GenerationMode.POSITIVE or spec.get("parameters") or spec.get("requestBody")
]


@schemathesis.serializer(JSON_LINES)
def json_lines(ctx: schemathesis.SerializationContext, value: Any) -> bytes:
    """An import body: a generated list is one JSON value per line, anything else one line."""
    values = value if isinstance(value, list) else [value]
    return b"".join(json.dumps(item).encode() + b"\n" for item in values)


@pytest.mark.parametrize(("method", "path", "mode"), CASES)
def test_every_answer_is_documented_below_500_and_clear(
    served_schema: Any, method: str, path: str, mode: GenerationMode
) -> None:
    operation = served_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def answers_well(case: schemathesis.Case[Any]) -> None:
        case.call_and_validate(checks=CHECKS)

    answers_well()
