"""``create_app``: the HTTP API wired from what it is given; it looks nothing up."""

from __future__ import annotations

from fastapi import FastAPI

from cogsub.api import consolidation, health, memories, recall
from cogsub.api.auth import ApiKeys
from cogsub.api.deps import STATE_ATTRIBUTE, ApiState, Consolidate, Readiness
from cogsub.api.errors import CatchAllMiddleware, install_error_handlers
from cogsub.api.limits import ApiLimits, BodyLimitMiddleware
from cogsub.recall import MemoryService

API_VERSION = "0.1.0"


def create_app(
    *,
    service: MemoryService,
    auth: ApiKeys | None,
    limits: ApiLimits,
    readiness: Readiness | None = None,
    consolidate: Consolidate | None = None,
) -> FastAPI:
    """The memory API over ``service``.

    Args:
        service: Serves retain, recall and get.
        auth: The API keys and their banks; None leaves every bank open (loopback use).
        limits: Body size and readiness timeout.
        readiness: Awaited by ``/readyz``; it should touch the index. None: always ready.
        consolidate: Runs one consolidation round of a bank; None: the route answers 503.
    """
    app = FastAPI(
        title="Cognitive Substrate memory API",
        version=API_VERSION,
        summary="Typed memory for AI agents: retain, recall, get.",
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
    )
    # Routes reach what they need through cogsub.api.deps, never through globals.
    state = ApiState(
        service=service, keys=auth, limits=limits, readiness=readiness, consolidate=consolidate
    )
    setattr(app.state, STATE_ATTRIBUTE, state)
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(memories.router)
    app.include_router(recall.router)
    app.include_router(consolidation.router)
    # The last added is the outermost: a crash anywhere, the size check included, is a JSON 500.
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=limits.max_body_bytes)
    app.add_middleware(CatchAllMiddleware)
    return app
