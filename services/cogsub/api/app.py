"""``create_app``: the HTTP API wired from what it is given; it looks nothing up."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from cogsub.api import banks, consolidation, dead_letters, health, memories, recall
from cogsub.api import context as context_routes
from cogsub.api import lifecycle as lifecycle_routes
from cogsub.api import operations as operations_routes
from cogsub.api.auth import ApiKeys
from cogsub.api.deps import STATE_ATTRIBUTE, ApiState, Consolidate, Readiness
from cogsub.api.errors import CatchAllMiddleware, install_error_handlers
from cogsub.api.limits import ApiLimits, BodyLimitMiddleware
from cogsub.api.metrics import MetricsMiddleware, mount_metrics
from cogsub.api.ratelimit import RateLimitMiddleware
from cogsub.api.readiness import ReadinessProbes
from cogsub.console.mount import mount_console
from cogsub.console.rounds import OperationsSources
from cogsub.deadletters.desk import DeadLetterDesk
from cogsub.lifecycle import Lifecycle
from cogsub.mcp import mount_mcp
from cogsub.recall import MemoryService
from cogsub.recall.answer import ChatModel
from cogsub.telemetry.metrics import Metrics

API_VERSION = "0.1.0"
DOCS_ASSETS = "/docs/assets"
# The package of the Swagger UI dist files; its folder is named after the UI's version.
SWAGGER_UI_PACKAGE = "swagger_ui_bundle"


def create_app(
    *,
    service: MemoryService,
    auth: ApiKeys | None,
    limits: ApiLimits,
    readiness: Readiness | None = None,
    consolidate: Consolidate | None = None,
    lifecycle: Lifecycle | None = None,
    answerer: ChatModel | None = None,
    metrics: Metrics | None = None,
    dead_letter_desk: DeadLetterDesk | None = None,
    operations: OperationsSources | None = None,
    console: bool = False,
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
        answerer: The chat model behind ``/answer``; None: it answers 409
            ``not_configured``, naming the settings to set.
        metrics: Served at ``GET /metrics`` and fed by every request; None: no metrics.
        dead_letter_desk: Behind ``/v1/dead-letters``; None: those routes answer 503.
        operations: Behind ``/v1/operations`` (lag, recent rounds); None: no rounds, lag unknown.
        console: Serve the web console at ``/ui``.
    """
    app = FastAPI(
        title="Cognitive Substrate memory API",
        version=API_VERSION,
        summary="Typed memory for AI agents: retain, recall, get.",
        openapi_url="/openapi.json",
        docs_url=None,  # FastAPI's own page loads Swagger UI from a CDN: blank offline
        redoc_url=None,
    )
    mount_docs(app)
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
    app.include_router(banks.router)
    app.include_router(recall.router)
    setattr(app.state, context_routes.ANSWERER_ATTRIBUTE, answerer)
    app.include_router(context_routes.router)
    app.include_router(consolidation.router)
    app.include_router(lifecycle_routes.router)
    setattr(app.state, dead_letters.DESK_ATTRIBUTE, dead_letter_desk)
    app.include_router(dead_letters.router)
    setattr(app.state, operations_routes.SOURCES_ATTRIBUTE, operations)
    app.include_router(operations_routes.router)
    if console:
        mount_console(app)
    mount_mcp(app, keys=auth)  # /mcp and /mcp/{bank_id}: the tools over streamable HTTP
    if metrics is not None:
        mount_metrics(app, metrics, keys=auth)
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


def swagger_ui_dist() -> Path:
    """The folder of Swagger UI's JS, CSS and icons, as installed with the package."""
    vendor = Path(str(files(SWAGGER_UI_PACKAGE) / "vendor"))
    found = sorted(vendor.glob("swagger-ui-*/swagger-ui-bundle.js"))
    if not found:
        raise RuntimeError(f"no Swagger UI under {vendor}; reinstall {SWAGGER_UI_PACKAGE}")
    return found[-1].parent


def mount_docs(app: FastAPI) -> None:
    """``/docs`` from assets shipped in the package, so it works with no network."""
    app.mount(DOCS_ASSETS, StaticFiles(directory=swagger_ui_dist()), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"{app.title} - docs",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png",
            # Swagger UI would otherwise send the document to an online validator.
            swagger_ui_parameters={"validatorUrl": None},
        )
