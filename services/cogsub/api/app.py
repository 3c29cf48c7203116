"""``create_app``: the HTTP API wired from what it is given; it looks nothing up."""

from __future__ import annotations

from fastapi import FastAPI

from cogsub.api import consolidation, health, memories, recall
from cogsub.api import lifecycle as lifecycle_routes
from cogsub.api.auth import ApiKeys
from cogsub.api.deps import STATE_ATTRIBUTE, ApiState, Consolidate, Readiness
from cogsub.api.errors import CatchAllMiddleware, install_error_handlers
from cogsub.api.limits import ApiLimits, BodyLimitMiddleware
from cogsub.api.metrics import MetricsMiddleware, mount_metrics
from cogsub.api.ratelimit import RateLimitMiddleware
from cogsub.api.readiness import ReadinessProbes
from cogsub.lifecycle import Lifecycle
from cogsub.recall import MemoryService
from cogsub.telemetry.metrics import Metrics

API_VERSION = "0.1.0"


def create_app(
    *,
    service: MemoryService,
    auth: ApiKeys | None,
    limits: ApiLimits,
    readiness: Readiness | None = None,
    consolidate: Consolidate | None = None,
    lifecycle: Lifecycle | None = None,
    metrics: Metrics | None = None,
) -> FastAPI:
    """The memory API over ``service``.

    Args:
        service: Serves retain, recall and get.
        auth: The API keys and their banks; None leaves every bank open (loopback use).
        limits: Body size and readiness timeout.
        readiness: The probes ``/readyz`` runs, by dependency name (``index``, ``archive``,
            ``bus``), each bounded by ``limits.readiness_timeout_s``. None: always ready.
        consolidate: Runs one consolidation round of a bank; None: the route answers 503.
        lifecycle: Forgets memories and banks, exports and imports; None: those routes
            answer 503.
        metrics: Served at ``GET /metrics`` and fed by every request; None: no metrics.
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
        service=service,
        keys=auth,
        limits=limits,
        readiness=(
            ReadinessProbes(readiness, timeout_s=limits.readiness_timeout_s) if readiness else None
        ),
        consolidate=consolidate,
        lifecycle=lifecycle,
    )
    setattr(app.state, STATE_ATTRIBUTE, state)
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(memories.router)
    app.include_router(recall.router)
    app.include_router(consolidation.router)
    app.include_router(lifecycle_routes.router)
    if metrics is not None:
        mount_metrics(app, metrics)
    # The last added is the outermost: a crash anywhere, the size check included, is a JSON 500.
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=limits.max_body_bytes)
    if limits.rate_limit_per_s is not None:
        # Outside the body limit: a caller over its rate is refused before its body is read.
        app.add_middleware(
            RateLimitMiddleware,
            rate_per_s=limits.rate_limit_per_s,
            burst=limits.rate_limit_burst,
            keys=auth,
        )
    if metrics is not None:  # inside the catch-all (a crash counts as its 500), outside the limit
        app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.add_middleware(CatchAllMiddleware)
    return app
