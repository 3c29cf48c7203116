"""Browsing and changing what banks hold: bank summaries, memory pages, history, update.

``GET /v1/banks`` lists the banks the caller's key grants (every bank holding
memories for a ``*`` key, or when no keys are configured). The routes under a
bank are behind the same per-bank key check as every ``/v1/banks/{bank_id}/…``
route, so a key never lists, reads or updates another bank's memories, and
another bank's ids never appear in an answer.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import ValidationError

from cogsub.api.auth import checked_memory_id
from cogsub.api.deps import Bank, Granted, MemoryId, Service
from cogsub.api.errors import BANK_ERRORS, BODY_ERRORS, ErrorBody
from cogsub.core.errors import (
    FieldProblem,
    InvalidInputError,
)
from cogsub.core.history import MemoryHistory, MemoryUpdate
from cogsub.core.listing import (
    DEFAULT_PAGE_LIMIT,
    MAX_BANK_PAGE_LIMIT,
    MAX_CURSOR_LENGTH,
    MAX_PAGE_LIMIT,
    BankPage,
    MemoryListFilters,
    MemoryPage,
)
from cogsub.core.memory import RetainResult
from cogsub.lifecycle.history import MemoryHistorian
from cogsub.lifecycle.listing import MemoryBrowser
from cogsub.lifecycle.update import MemoryUpdater
from cogsub.recall import MemoryService

router = APIRouter(prefix="/v1/banks", tags=["banks"])

_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "This bank has no such memory"}
}
_Cursor = Annotated[
    str | None,
    Query(max_length=MAX_CURSOR_LENGTH, description="`next_cursor` of the previous page"),
]
_Listed = Annotated[
    list[str] | None,
    Query(description="comma-separated, or the parameter repeated"),
]


def _browser(service: MemoryService) -> MemoryBrowser:
    stores = service.stores
    return MemoryBrowser(archive=stores.archive, index=stores.index)


@router.get(
    "",
    operation_id="listBanks",
    summary="The banks this key grants, each with memory counts by type and its newest time",
    responses={k: v for k, v in BANK_ERRORS.items() if k != 403},
)
async def list_banks(
    service: Service,
    granted: Granted,
    cursor: _Cursor = None,
    limit: Annotated[int, Query(ge=1, le=MAX_BANK_PAGE_LIMIT)] = 100,
) -> BankPage:
    return await _browser(service).banks(granted, cursor=cursor, limit=limit)


@router.get(
    "/{bank_id}/memories",
    operation_id="listMemories",
    summary="A bank's memories newest first, a page at a time (a cursor stable under writes)",
    responses=BANK_ERRORS,
)
async def list_memories(
    bank_id: Bank,
    service: Service,
    types: _Listed = None,
    tags: _Listed = None,
    since: Annotated[str | None, Query(description="ISO-8601 with a timezone; inclusive")] = None,
    until: Annotated[str | None, Query(description="ISO-8601 with a timezone; exclusive")] = None,
    include_superseded: bool = False,
    cursor: _Cursor = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_LIMIT)] = DEFAULT_PAGE_LIMIT,
) -> MemoryPage:
    ask = list_filters(
        types=types,
        tags=tags,
        since=since,
        until=until,
        include_superseded=include_superseded,
        cursor=cursor,
        limit=limit,
    )
    return await _browser(service).memories(bank_id, ask)


@router.get(
    "/{bank_id}/memories/{memory_id}/history",
    operation_id="memoryHistory",
    summary="Where a memory came from and what became of it: versions, supersession, evidence",
    responses={**BANK_ERRORS, **_NOT_FOUND},
)
async def memory_history(bank_id: Bank, service: Service, memory_id: MemoryId) -> MemoryHistory:
    stores = service.stores
    historian = MemoryHistorian(archive=stores.archive, index=stores.index)
    return await historian.history(bank_id, checked_memory_id(memory_id))


@router.put(
    "/{bank_id}/memories/{memory_id}",
    status_code=201,
    operation_id="updateMemory",
    summary="A new version of a memory that supersedes it (the old stays readable)",
    responses={
        **BANK_ERRORS,
        **BODY_ERRORS,
        **_NOT_FOUND,
        202: {"model": RetainResult, "description": "Accepted durably; not recallable yet"},
        409: {"model": ErrorBody, "description": "Already superseded: update its newest version"},
    },
)
async def update_memory(
    bank_id: Bank, service: Service, memory_id: MemoryId, body: MemoryUpdate, response: Response
) -> RetainResult:
    result = await MemoryUpdater(service).update(bank_id, checked_memory_id(memory_id), body)
    response.status_code = 201 if result.recallable else 202
    response.headers["Location"] = f"/v1/banks/{bank_id}/memories/{result.memory_id}"
    return result


def list_filters(
    *,
    types: list[str] | None,
    tags: list[str] | None,
    since: str | None,
    until: str | None,
    include_superseded: bool,
    cursor: str | None,
    limit: int,
) -> MemoryListFilters:
    """The query parameters as ``MemoryListFilters``; a 422 names each bad one and its rule."""
    fields = {
        "types": split_values(types),
        "tags": tag_values(tags),
        "since": since,
        "until": until,
        "include_superseded": include_superseded,
        "cursor": cursor,
        "limit": limit,
    }
    try:
        return MemoryListFilters.model_validate(fields)
    except ValidationError as exc:
        problems = [
            FieldProblem(".".join(str(p) for p in e["loc"][:1]) or "(query)", e["msg"])
            for e in exc.errors(include_url=False)
        ]
        raise InvalidInputError(problems) from None


def tag_values(values: list[str] | None) -> list[str] | None:
    """Repeated ``tags`` parameters verbatim; a single one comma-separated.

    A tag may hold a comma or edge spaces (``Tag`` allows both), so only a lone value is
    split: such a tag is asked for by repeating the parameter (the tag twice if alone).
    """
    if values is not None and len(values) > 1:
        return values
    return split_values(values)


def split_values(values: list[str] | None) -> list[str] | None:
    """``["a,b", "c"]`` → ``["a", "b", "c"]``: comma-separated and repeated parameters alike."""
    parts = [part.strip() for value in values or [] for part in value.split(",") if part.strip()]
    return parts or None  # ``?types=`` asks for no filter, not for nothing
