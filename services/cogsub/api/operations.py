"""Read-only operator routes: pipeline lag, the caller's grants, recent consolidation rounds.

``GET /v1/operations/status`` tells a caller (any valid key, or anyone when no keys are
required) which banks its key grants and how far ingestion and extraction lag;
``GET /v1/operations/consolidation-rounds`` lists the latest rounds of the banks the key
grants. The web console starts from these.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from cogsub.api.auth import within_grant
from cogsub.api.deps import Granted, State
from cogsub.api.errors import ErrorBody
from cogsub.console.rounds import OperationsSources, RoundLog
from cogsub.core.operations import MAX_ROUNDS, ConsolidationRounds, OperationsStatus, PipelineLag

#: Where ``create_app`` leaves the sources on ``app.state``.
SOURCES_ATTRIBUTE = "cogsub_operations"

router = APIRouter(prefix="/v1/operations", tags=["operations"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Keys are required: no API key, or an unknown one"},
    403: {"model": ErrorBody, "description": "The API key does not grant that bank"},
}


async def _unknown_lag() -> PipelineLag:
    return PipelineLag(ingestion=None, extraction=None)


# An app built without sources (tests, embedded clients) ran no round and knows no lag.
_UNWIRED = OperationsSources(rounds=RoundLog(per_bank=1, banks=1), lag=_unknown_lag)


def _sources(request: Request) -> OperationsSources:
    sources = getattr(request.app.state, SOURCES_ATTRIBUTE, None)
    return sources if isinstance(sources, OperationsSources) else _UNWIRED


Sources = Annotated[OperationsSources, Depends(_sources)]


@router.get(
    "/status",
    operation_id="operations_status",
    summary="The banks the caller's key grants, and ingestion and extraction lag",
    responses=_ERRORS,
)
async def operations_status(state: State, granted: Granted, sources: Sources) -> OperationsStatus:
    # The lag counts every tenant's records: a bank key is not told other banks' volume.
    return OperationsStatus(
        keys_required=state.keys is not None,
        operator=granted is None,
        banks=sorted(granted) if granted is not None else None,
        lag=await sources.lag() if granted is None else None,
    )


@router.get(
    "/consolidation-rounds",
    operation_id="consolidation_rounds",
    summary="The latest consolidation rounds of the banks the key grants, newest first",
    responses={
        **_ERRORS,
        422: {"model": ErrorBody, "description": "A parameter breaks a rule"},
    },
)
async def consolidation_rounds(
    granted: Granted,
    sources: Sources,
    bank_id: Annotated[str | None, Query(description="one bank only")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_ROUNDS)] = 20,
) -> ConsolidationRounds:
    """Rounds this API process ran or was asked for (kept in memory, lost on restart).

    Not the rounds a separate `cogsub consolidator` ran: a fleet shows only this replica's.
    """
    if bank_id is not None:
        bank_id = within_grant(granted, bank_id)
    return ConsolidationRounds(
        rounds=sources.rounds.latest(banks=granted, bank_id=bank_id, limit=limit)
    )
