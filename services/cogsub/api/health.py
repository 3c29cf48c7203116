"""Liveness and readiness, for load balancers and orchestrators (no key needed)."""

from __future__ import annotations

import asyncio
from typing import Literal

import structlog
from fastapi import APIRouter
from pydantic import BaseModel

from cogsub.api.deps import State
from cogsub.api.errors import ErrorBody
from cogsub.core.errors import UnavailableError

log = structlog.get_logger("cogsub.api")

router = APIRouter(tags=["health"])


class HealthStatus(BaseModel):
    status: Literal["ok"] = "ok"


@router.get("/healthz", operation_id="liveness", summary="The process is up")
async def healthz() -> HealthStatus:
    return HealthStatus()


@router.get(
    "/readyz",
    operation_id="readiness",
    summary="The memory index answers",
    responses={503: {"model": ErrorBody, "description": "Not ready; retry after Retry-After"}},
)
async def readyz(state: State) -> HealthStatus:
    if state.readiness is not None:
        try:
            await asyncio.wait_for(state.readiness(), state.limits.readiness_timeout_s)
        except Exception as exc:
            # The probe is unauthenticated: the reason goes to the log, not to the caller.
            log.warning("api_not_ready", error_type=type(exc).__name__, error=str(exc))
            raise UnavailableError("not ready: the memory index did not answer") from None
    return HealthStatus()
