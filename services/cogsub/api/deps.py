"""What every route depends on: the app's wired state, the service, the authorised bank.

``create_app`` stores what it was given in ``app.state``; routes receive it
through these dependencies, so router modules hold no globals and two apps in
one process (tests, embedded clients) never share anything.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from cogsub.api.auth import ApiKeys, authorize
from cogsub.api.limits import ApiLimits
from cogsub.core.memory import ConsolidationReport
from cogsub.recall import MemoryService

STATE_ATTRIBUTE = "cogsub"

Readiness = Callable[[], Awaitable[object]]
Consolidate = Callable[[str], Awaitable[ConsolidationReport]]


@dataclass(frozen=True)
class ApiState:
    """Everything ``create_app`` received."""

    service: MemoryService
    keys: ApiKeys | None
    limits: ApiLimits
    readiness: Readiness | None
    consolidate: Consolidate | None = None


def api_state(request: Request) -> ApiState:
    state = getattr(request.app.state, STATE_ATTRIBUTE)
    assert isinstance(state, ApiState)
    return state


def _service(state: Annotated[ApiState, Depends(api_state)]) -> MemoryService:
    return state.service


_bearer = HTTPBearer(
    auto_error=False,
    description="An API key granting the bank in the path: `Authorization: Bearer <key>`.",
)


def _bank(
    bank_id: str,
    state: Annotated[ApiState, Depends(api_state)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    key = credentials.credentials if credentials is not None else None
    return authorize(state.keys, key, bank_id)


State = Annotated[ApiState, Depends(api_state)]
Service = Annotated[MemoryService, Depends(_service)]
Bank = Annotated[str, Depends(_bank)]
