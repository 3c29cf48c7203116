"""Liveness and readiness, for load balancers and orchestrators (no key needed)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel

from cogsub.api.deps import State
from cogsub.api.errors import ErrorBody

router = APIRouter(tags=["health"])


class HealthStatus(BaseModel):
    status: Literal["ok"] = "ok"


@router.get("/healthz", operation_id="liveness", summary="The process is up")
async def healthz() -> HealthStatus:
    return HealthStatus()


@router.get(
    "/readyz",
    operation_id="readiness",
    summary="The index, the archive and the bus answer",
    responses={
        503: {
            "model": ErrorBody,
            "description": "Not ready: `problems` names each dependency (`index`, `archive`,"
            " `bus`) that failed or did not answer in time; retry after Retry-After",
        }
    },
)
async def readyz(state: State) -> HealthStatus:
    if state.readiness is not None:
        await state.readiness.check()
    return HealthStatus()
