"""Consolidation and retrieval feedback routes.

``POST /v1/banks/{bank_id}/consolidate`` runs one bounded round of the bank and
returns what it produced, once every memory acknowledged before the call is
ingested and extracted (503 when that takes too long);
``POST /v1/banks/{bank_id}/feedback`` tells the substrate what the agent did
with recalled memories (returned / used / helpful).
"""

from __future__ import annotations

from fastapi import APIRouter

from cogsub.api.deps import Bank, Service, State
from cogsub.api.errors import BANK_ERRORS, BODY_ERRORS, ErrorBody
from cogsub.core.errors import UnavailableError
from cogsub.core.memory import ConsolidationReport, FeedbackRequest, FeedbackResult

router = APIRouter(prefix="/v1/banks/{bank_id}", tags=["consolidation"])


@router.post(
    "/consolidate",
    operation_id="consolidate",
    summary="Run one consolidation round: observations, preferences, procedure repairs, decay",
    responses={
        **BANK_ERRORS,
        503: {
            "model": ErrorBody,
            "description": "What was acknowledged before the call is not yet ingested and "
            "extracted (the message names the consumer group), or a backend is unavailable",
        },
    },
)
async def consolidate(bank_id: Bank, state: State) -> ConsolidationReport:
    """Covers every memory acknowledged before the call, so a retain without ``wait`` just
    before is in it. Idempotent: a second round over the same memories produces nothing new."""
    if state.consolidate is None:
        raise UnavailableError("consolidation is not wired into this API process")
    return await state.consolidate(bank_id)


@router.post(
    "/feedback",
    operation_id="feedback",
    summary="Reinforce recalled memories: returned, used or helpful",
    responses={
        **BANK_ERRORS,
        **BODY_ERRORS,
        404: {"model": ErrorBody, "description": "A memory id is not in this bank"},
    },
)
async def feedback(bank_id: Bank, service: Service, body: FeedbackRequest) -> FeedbackResult:
    """``used``/``helpful`` count more than ``returned`` and restore the memory's decay to 1."""
    return FeedbackResult(bank_id=bank_id, updated=await service.feedback(bank_id, body))
