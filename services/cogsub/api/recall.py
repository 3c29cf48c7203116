"""``POST /v1/banks/{bank_id}/recall``: the best memories of a bank for a query."""

from __future__ import annotations

from fastapi import APIRouter

from cogsub.api.deps import Bank, Service
from cogsub.api.errors import BANK_ERRORS, BODY_ERRORS
from cogsub.core.memory import RecallRequest, RecallResponse

router = APIRouter(prefix="/v1/banks/{bank_id}", tags=["recall"])


@router.post(
    "/recall",
    operation_id="recall",
    summary="Recall memories: hybrid retrieval, policy-weighted ranking, token budget",
    responses={**BANK_ERRORS, **BODY_ERRORS},
)
async def recall(bank_id: Bank, service: Service, body: RecallRequest) -> RecallResponse:
    """Results best first, each with its score breakdown (final = Σ weight × signal)."""
    return await service.recall(bank_id, body)
