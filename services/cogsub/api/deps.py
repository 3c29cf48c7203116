"""What every route depends on: the app's wired state, the service, the authorised bank.

``create_app`` stores what it was given in ``app.state``; routes receive it
through these dependencies, so router modules hold no globals and two apps in
one process (tests, embedded clients) never share anything.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Header, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from cogsub.api.auth import ApiKeys, authorize, authorize_operator, banks_granted, key_digest
from cogsub.api.limits import ApiLimits
from cogsub.api.readiness import Probe, ReadinessProbes
from cogsub.core.errors import UnavailableError
from cogsub.core.events import MAX_ID_LENGTH
from cogsub.core.memory import ConsolidationReport
from cogsub.lifecycle import Lifecycle, actor_label
from cogsub.recall import MemoryService

STATE_ATTRIBUTE = "cogsub"
ACTOR_HEADER = "X-Cogsub-Actor"
ACTOR_DIGEST_CHARS = 12

# The SafeId rule of cogsub.core.events, published in the OpenAPI document only: the
# routes check ids themselves (after the API key, so a caller without one learns nothing).
SAFE_ID_SCHEMA: dict[str, Any] = {
    "minLength": 1,
    "maxLength": MAX_ID_LENGTH,
    "pattern": "^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$",
}
_SAFE_ID_RULE = (
    f"1 to {MAX_ID_LENGTH} characters, a letter, digit or _ first, then letters, digits"
    " and _ . : @ + -, never '..'"
)
BankId = Annotated[
    str, Path(description=f"The bank: {_SAFE_ID_RULE}", json_schema_extra=SAFE_ID_SCHEMA)
]
MemoryId = Annotated[
    str, Path(description=f"The memory: {_SAFE_ID_RULE}", json_schema_extra=SAFE_ID_SCHEMA)
]

Readiness = Mapping[str, Probe]
"""The probes of ``/readyz`` by dependency name; see :class:`ReadinessProbes`."""
Consolidate = Callable[[str], Awaitable[ConsolidationReport]]


@dataclass(frozen=True)
class ApiState:
    """Everything ``create_app`` received."""

    service: MemoryService
    keys: ApiKeys | None
    limits: ApiLimits
    readiness: ReadinessProbes | None
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
    bank_id: BankId,
    state: Annotated[ApiState, Depends(api_state)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    key = credentials.credentials if credentials is not None else None
    return authorize(state.keys, key, bank_id)


def granted_banks(
    state: Annotated[ApiState, Depends(api_state)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> frozenset[str] | None:
    """The caller's banks; None: every bank (a '*' key, or no keys required)."""
    return banks_granted(state.keys, credentials.credentials if credentials else None)


def _operator(
    state: Annotated[ApiState, Depends(api_state)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    authorize_operator(state.keys, credentials.credentials if credentials else None)


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
Granted = Annotated[frozenset[str] | None, Depends(granted_banks)]
"""The banks the caller's key grants; None: every bank."""
Operator = Annotated[None, Depends(_operator)]
"""Passes for a key granting every bank ("*"), or anyone when no keys are required."""
