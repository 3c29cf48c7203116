"""Forgetting and moving a bank: DELETE a memory or the bank, GET …/export, POST …/import.

``DELETE /v1/banks/{bank_id}/memories/{memory_id}`` forgets one memory and what
was derived from its content; ``DELETE /v1/banks/{bank_id}?confirm={bank_id}``
forgets the whole bank (the confirmation must repeat the bank id). Both leave an
audit record naming the caller (the API key's digest prefix). ``GET …/export``
streams the bank as JSON lines; ``POST …/import`` takes such lines as its body
(within the API's body limit; ``cogsub import`` has none).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from cogsub.api.auth import checked_memory_id
from cogsub.api.deps import Actor, Bank, LifecycleDep, MemoryId
from cogsub.api.errors import BANK_ERRORS, ErrorBody
from cogsub.core.errors import FieldProblem, InvalidInputError
from cogsub.core.lifecycle import ForgetBankReport, ForgetReport, ImportReport

JSON_LINES = "application/x-ndjson"

router = APIRouter(prefix="/v1/banks/{bank_id}", tags=["lifecycle"])

_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "Neither the index nor the archive holds it here"},
}


@router.delete(
    "/memories/{memory_id}",
    operation_id="forget",
    summary="Forget a memory, and what was derived from its content, for good",
    responses={**BANK_ERRORS, **_NOT_FOUND},
)
async def forget(
    bank_id: Bank, lifecycle: LifecycleDep, actor: Actor, memory_id: MemoryId
) -> ForgetReport:
    """Gone from recall at once; the audit record keeps ids and counts, never the text.

    A memory already forgotten is 404, like one never known.
    """
    return await lifecycle.forget(bank_id, checked_memory_id(memory_id), actor=actor)


@router.delete(
    "",
    operation_id="forgetBank",
    summary="Forget every memory of the bank (confirm with ?confirm=<bank_id>)",
    responses=BANK_ERRORS,
)
async def forget_bank(
    bank_id: Bank,
    lifecycle: LifecycleDep,
    actor: Actor,
    confirm: Annotated[str | None, Query(description="must repeat the bank id")] = None,
    scan_archive: Annotated[
        bool, Query(description="also read every raw event for ones the index lacks (slow)")
    ] = False,
) -> ForgetBankReport:
    """Idempotent: an interrupted or repeated call completes what is left."""
    if confirm != bank_id:
        raise InvalidInputError(
            [FieldProblem("confirm", f"must be the bank id {bank_id!r} to forget the whole bank")]
        )
    return await lifecycle.forget_bank(bank_id, actor=actor, scan_archive=scan_archive)


@router.get(
    "/export",
    operation_id="exportBank",
    summary="The bank as JSON lines: header, memories with index state, records, trailer",
    response_class=StreamingResponse,
    responses={**BANK_ERRORS, 200: {"content": {JSON_LINES: {}}}},
)
async def export_bank(bank_id: Bank, lifecycle: LifecycleDep) -> StreamingResponse:
    """Streamed; a body without the trailer line was cut short."""
    lines = lifecycle.export_bank(bank_id)
    # The header comes after listing the bank: a store that is down answers 503 here,
    # before the status line is out, instead of a dropped stream.
    header = await anext(lines)

    async def body() -> AsyncIterator[bytes]:
        yield header
        async for line in lines:
            yield line

    return StreamingResponse(body(), media_type=JSON_LINES)


@router.post(
    "/import",
    operation_id="importBank",
    summary="Write an export's objects (never overwriting) and index its memories",
    responses=BANK_ERRORS,
    openapi_extra={"requestBody": {"content": {JSON_LINES: {}}, "required": True}},
)
async def import_bank(bank_id: Bank, lifecycle: LifecycleDep, request: Request) -> ImportReport:
    """Conflicting and invalid lines are counted and listed; the rest is imported."""
    body = await request.body()
    return await lifecycle.import_bank(body.splitlines(), bank_id=bank_id)
