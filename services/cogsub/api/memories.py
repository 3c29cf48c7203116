"""``/v1/banks/{bank_id}/memories`` and the typed-block helpers around it.

``POST .../memories`` takes a RetainRequest as is. The helpers take only what
their block needs and store it verbatim: ``.../procedures`` (steps, rationale,
supersedes), and one route per typed text block, built from the table in
:mod:`cogsub.core.text_blocks`: ``.../reasonings``, ``.../preferences``,
``.../corrections`` and ``PUT .../profile``. A retain answers 201 when the
memory is already recallable (``wait``), else 202: it is durably accepted and
on its way.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cogsub.api.auth import checked_memory_id
from cogsub.api.deps import Bank, MemoryId, Service
from cogsub.api.errors import BANK_ERRORS, BODY_ERRORS, ErrorBody
from cogsub.core.errors import FieldProblem, InvalidInputError
from cogsub.core.events import (
    MAX_TAGS,
    MAX_TEXT_LENGTH,
    FactType,
    Instant,
    SafeId,
    ShortText,
    Tag,
)
from cogsub.core.memory import (
    MAX_STEPS,
    MemoryRecord,
    RetainContext,
    RetainRequest,
    RetainResult,
    procedure_text,
)
from cogsub.core.text_blocks import TEXT_BLOCKS, TextBlock
from cogsub.recall import MemoryService

Step = Annotated[str, Field(min_length=1, max_length=2_000)]


class _BlockBody(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS - 2)
    timestamp: Instant | None = None
    context: RetainContext = Field(default_factory=RetainContext)
    memory_id: SafeId | None = Field(
        default=None, description="client-chosen id; retrying with the same id is idempotent"
    )
    wait: bool = Field(default=False, description="answer only once the memory is recallable")


class ProcedureBody(_BlockBody):
    """How a task was done: distilled steps and why, stored verbatim."""

    steps: list[Step] = Field(min_length=1, max_length=MAX_STEPS)
    rationale: ShortText | None = None
    supersedes: SafeId | None = Field(
        default=None, description="the memory id of the procedure version this one repairs"
    )


class TextBlockBody(_BlockBody):
    """One typed block of text (reasoning, preference, correction, profile), stored verbatim."""

    text: str = Field(min_length=1, max_length=MAX_TEXT_LENGTH)


RETAIN_RESPONSES: dict[int | str, dict[str, Any]] = {
    **BANK_ERRORS,
    **BODY_ERRORS,
    202: {"model": RetainResult, "description": "Accepted durably; not recallable yet"},
    404: {"model": ErrorBody, "description": "`supersedes` names no procedure of this bank"},
    409: {"model": ErrorBody, "description": "The memory id is taken by different content"},
}


def _request(fields: dict[str, Any]) -> RetainRequest:
    """The RetainRequest a helper body stands for; a composed text can still break a rule."""
    try:
        return RetainRequest.model_validate(fields)
    except ValidationError as exc:
        problems = [
            FieldProblem(".".join(str(p) for p in e["loc"]) or "(body)", e["msg"])
            for e in exc.errors(include_url=False)
        ]
        raise InvalidInputError(problems) from None


router = APIRouter(prefix="/v1/banks/{bank_id}", tags=["memories"])


async def _retained(
    service: MemoryService, bank_id: str, request: RetainRequest, response: Response
) -> RetainResult:
    result = await service.retain(bank_id, request)
    response.status_code = 201 if result.recallable else 202
    response.headers["Location"] = f"/v1/banks/{bank_id}/memories/{result.memory_id}"
    return result


def _block(fact_type: FactType, body: TextBlockBody) -> RetainRequest:
    fields = body.model_dump(exclude={"text"})
    return _request({**fields, "content": body.text, "fact_type": fact_type})


@router.post(
    "/memories",
    status_code=201,
    operation_id="retain",
    summary="Keep a memory (any fact type)",
    responses=RETAIN_RESPONSES,
)
async def retain(
    bank_id: Bank, service: Service, body: RetainRequest, response: Response
) -> RetainResult:
    return await _retained(service, bank_id, body, response)


@router.post(
    "/procedures",
    status_code=201,
    operation_id="retainProcedure",
    summary="Keep a procedure: steps and rationale, verbatim; a new version with supersedes",
    responses=RETAIN_RESPONSES,
)
async def retain_procedure(
    bank_id: Bank, service: Service, body: ProcedureBody, response: Response
) -> RetainResult:
    fields = body.model_dump()
    content = procedure_text(body.steps, body.rationale)
    request = _request({**fields, "content": content, "fact_type": FactType.PROCEDURE})
    return await _retained(service, bank_id, request, response)


def _add_text_block_route(block: TextBlock) -> None:
    """The route of one typed text block, as the table in ``cogsub.core.text_blocks`` says."""

    async def retain_block(
        bank_id: Bank, service: Service, body: TextBlockBody, response: Response
    ) -> RetainResult:
        return await _retained(service, bank_id, _block(block.fact_type, body), response)

    router.add_api_route(
        f"/{block.resource}",
        retain_block,
        methods=[block.method],
        status_code=201,
        operation_id=block.operation_id,
        name=_snake_case(block.operation_id),
        summary=block.summary,
        responses=RETAIN_RESPONSES,
    )


def _snake_case(operation_id: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation_id).lower()


for _text_block in TEXT_BLOCKS.values():
    _add_text_block_route(_text_block)


@router.get(
    "/memories/{memory_id}",
    operation_id="getMemory",
    summary="One memory with its full archived event",
    responses={
        **BANK_ERRORS,
        404: {"model": ErrorBody, "description": "This bank has no such memory"},
    },
)
async def get_memory(bank_id: Bank, service: Service, memory_id: MemoryId) -> MemoryRecord:
    return await service.get_memory(bank_id, checked_memory_id(memory_id))
