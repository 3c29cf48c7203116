"""``GET /metrics`` and the request metrics of the API.

``create_app`` stores the process's ``Metrics`` with :func:`mount_metrics`, and
the route reaches it through :func:`app_metrics`, never a global. Requests are
counted by route template (``/v1/banks/{bank_id}/recall``), never by raw path,
so bank ids never become label values. When the API has keys, the endpoint
needs an operator key (one granting ``"*"``): its numbers span every bank, so a
key for some banks must not read them.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cogsub.api.auth import ApiKeys, authorize_operator
from cogsub.api.errors import ErrorBody
from cogsub.core.errors import NotFoundError
from cogsub.telemetry.metrics import EXPOSITION_CONTENT_TYPE, UNMATCHED_ROUTE, Metrics

METRICS_ATTRIBUTE = "cogsub_metrics"
METRICS_KEYS_ATTRIBUTE = "cogsub_metrics_keys"

router = APIRouter(tags=["metrics"])


def app_metrics(request: Request) -> Metrics:
    """The ``Metrics`` given to :func:`mount_metrics` for this app."""
    metrics = getattr(request.app.state, METRICS_ATTRIBUTE, None)
    if not isinstance(metrics, Metrics):
        raise NotFoundError("this API serves no metrics")
    return metrics


_operator_bearer = HTTPBearer(
    auto_error=False,
    description='When the API has keys: an operator key, one granting `"*"`.',
)


def operator_metrics(
    metrics: Annotated[Metrics, Depends(app_metrics)],
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_operator_bearer)],
) -> Metrics:
    """The app's metrics, once the caller shows an operator key (when keys are required)."""
    keys = getattr(request.app.state, METRICS_KEYS_ATTRIBUTE, None)
    authorize_operator(keys, credentials.credentials if credentials is not None else None)
    return metrics


AppMetrics = Annotated[Metrics, Depends(operator_metrics)]


@router.get(
    "/metrics",
    operation_id="metrics",
    summary="Prometheus metrics of this process (text format 0.0.4)",
    response_class=Response,
    responses={
        200: {"content": {EXPOSITION_CONTENT_TYPE: {}}},
        401: {"model": ErrorBody, "description": "Keys are required: no key, or an unknown one"},
        403: {"model": ErrorBody, "description": 'The key does not grant every bank ("*")'},
    },
)
async def metrics(state: AppMetrics) -> Response:
    return Response(state.exposition(), media_type=EXPOSITION_CONTENT_TYPE)


def mount_metrics(app: FastAPI, metrics: Metrics, *, keys: ApiKeys | None = None) -> None:
    """Serve ``metrics`` at ``GET /metrics`` of ``app``, to operator ``keys`` (None: anyone)."""
    setattr(app.state, METRICS_ATTRIBUTE, metrics)
    setattr(app.state, METRICS_KEYS_ATTRIBUTE, keys)
    app.include_router(router)


def route_template(scope: Scope) -> str:
    """The template of the route that handled ``scope``; ``unmatched`` when none did."""
    route = scope.get("route")
    template = getattr(route, "path_format", None) or getattr(route, "path", None)
    return template if isinstance(template, str) and template else UNMATCHED_ROUTE


class MetricsMiddleware:
    """Counts and times every HTTP request by route template and status.

    Add it inside ``CatchAllMiddleware`` (so a crash still counts as its 500) and
    outside the body limit (so refused bodies count as their 413). The route is
    known only after routing, which fills in the same scope this middleware holds.
    """

    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: int | None = None

        async def recording(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, recording)
        except Exception:
            status = 500 if status is None else status
            raise
        finally:
            if status is not None:  # a client that left before any answer is not a request
                self.metrics.record_http(
                    route_template(scope), status, time.perf_counter() - started
                )
