"""What every route depends on: the app's wired state, the service, the authorised bank.

``create_app`` stores what it was given in ``app.state``; routes receive it
through these dependencies, so router modules hold no globals and two apps in
one process (tests, embedded clients) never share anything.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from cogsub.api.auth import ApiKeys, authorize, key_digest
from cogsub.api.limits import ApiLimits
from cogsub.core.errors import UnavailableError
from cogsub.core.memory import ConsolidationReport
from cogsub.lifecycle import Lifecycle, actor_label
from cogsub.recall import MemoryService

STATE_ATTRIBUTE = "cogsub"
ACTOR_HEADER = "X-Cogsub-Actor"
ACTOR_DIGEST_CHARS = 12

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
    lifecycle: Lifecycle | None = None


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


def _lifecycle(state: Annotated[ApiState, Depends(api_state)]) -> Lifecycle:
    if state.lifecycle is None:
        raise UnavailableError("forget, export and import are not wired into this API process")
    return state.lifecycle


def _actor(
    state: Annotated[ApiState, Depends(api_state)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    declared: Annotated[str | None, Header(alias=ACTOR_HEADER, include_in_schema=False)] = None,
) -> str:
    """Who is asking, for audit records: the key's digest prefix when keys are required.

    Without keys every caller is trusted alike, so a label the client declares
    (``sdk-embedded``, ``cli``) is as good as anything; with keys it is ignored.
    """
    if state.keys is not None and credentials is not None:
        return f"key:{key_digest(credentials.credentials).hex()[:ACTOR_DIGEST_CHARS]}"
    return actor_label(declared)


State = Annotated[ApiState, Depends(api_state)]
Service = Annotated[MemoryService, Depends(_service)]
Bank = Annotated[str, Depends(_bank)]
LifecycleDep = Annotated[Lifecycle, Depends(_lifecycle)]
Actor = Annotated[str, Depends(_actor)]
