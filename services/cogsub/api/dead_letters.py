"""Operator routes over the dead-letter topics: list, show, retry.

``GET /v1/dead-letters`` pages through ``experience.raw.dlq`` and
``consolidation.dlq``; ``GET /v1/dead-letters/{topic}/{partition}/{offset}`` shows
one letter; ``POST …/retry`` publishes it back to the topic it came from. Dead
letters hold any bank's data, so when keys are configured only a key granting
every bank (``"*"``) may use these routes.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, ConfigDict

from cogsub.api.deps import SAFE_ID_SCHEMA, Operator
from cogsub.api.errors import ErrorBody
from cogsub.core.errors import UnavailableError
from cogsub.deadletters.desk import MAX_PAGE, DeadLetterDesk, checked_topic
from cogsub.deadletters.letters import DeadLetter, Position

#: Where ``create_app`` leaves the desk on ``app.state``.
DESK_ATTRIBUTE = "cogsub_dead_letters"

router = APIRouter(prefix="/v1/dead-letters", tags=["operations"])


class DeadLetterView(BaseModel):
    """One dead letter: where, when, why, from where, and the original bytes."""

    model_config = ConfigDict(frozen=True)

    id: str
    topic: str
    partition: int
    offset: int
    time: datetime
    kind: str
    reason: str
    source: str | None
    bank_id: str | None
    event_id: str | None
    key: str | None
    value_text: str | None
    value_base64: str

    @classmethod
    def of(cls, letter: DeadLetter) -> DeadLetterView:
        return cls(
            id=str(letter.at),
            topic=letter.at.topic,
            partition=letter.at.partition,
            offset=letter.at.offset,
            time=datetime.fromtimestamp(letter.timestamp_ms / 1000, UTC),
            kind=letter.kind,
            reason=letter.reason,
            source=str(letter.source) if letter.source else None,
            bank_id=letter.bank_id,
            event_id=letter.event_id,
            key=letter.key.decode("utf-8", "replace") if letter.key is not None else None,
            value_text=_utf8(letter.value),
            value_base64=base64.b64encode(letter.value).decode(),
        )


class DeadLetterPage(BaseModel):
    model_config = ConfigDict(frozen=True)

    dead_letters: list[DeadLetterView]
    next: str | None
    """Pass as ``after`` for the next page; null: this was the last."""


class RetryResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    republished_to: str


def _utf8(value: bytes) -> str | None:
    try:
        return value.decode()
    except UnicodeDecodeError:
        return None


def _desk(request: Request, _: Operator) -> DeadLetterDesk:
    desk = getattr(request.app.state, DESK_ATTRIBUTE, None)
    if not isinstance(desk, DeadLetterDesk):
        raise UnavailableError("dead letters are not wired into this API process")
    return desk


Desk = Annotated[DeadLetterDesk, Depends(_desk)]
DeadLetterId = Annotated[
    str,
    Path(
        description="The dead letter, `topic:partition:offset` (e.g. `experience.raw.dlq:0:12`);"
        " a safe id: letters, digits and _ . : @ + -, never '..'",
        json_schema_extra=SAFE_ID_SCHEMA,
    ),
]
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in {
        401: "No API key, or an unknown one",
        403: "The API key does not grant every bank",
        404: "No dead letter there",
        422: "A parameter breaks a rule",
    }.items()
}


@router.get(
    "", operation_id="list_dead_letters", summary="Page through dead letters", responses=_ERRORS
)
async def list_dead_letters(
    desk: Desk,
    topic: Annotated[str | None, Query(description="one dead-letter topic only")] = None,
    after: Annotated[str | None, Query(description="a previous page's `next`")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
) -> DeadLetterPage:
    """Oldest first per topic and partition, with the reason and the original bytes."""
    start = Position.parse(after, field="after") if after is not None else None
    page = await desk.page(topic=topic, after=start, limit=limit)
    return DeadLetterPage(
        dead_letters=[DeadLetterView.of(letter) for letter in page.letters],
        next=str(page.next) if page.next is not None else None,
    )


@router.get(
    "/{dead_letter_id}",
    operation_id="show_dead_letter",
    summary="One dead letter",
    responses=_ERRORS,
)
async def show_dead_letter(desk: Desk, dead_letter_id: DeadLetterId) -> DeadLetterView:
    return DeadLetterView.of(await desk.show(_position(dead_letter_id)))


@router.post(
    "/{dead_letter_id}/retry",
    operation_id="retry_dead_letter",
    summary="Publish a dead letter back to its source topic (after fixing the cause)",
    responses=_ERRORS,
)
async def retry_dead_letter(desk: Desk, dead_letter_id: DeadLetterId) -> RetryResult:
    """The letter stays listed; the record published again names it in a header."""
    retried = await desk.retry(_position(dead_letter_id))
    return RetryResult(id=str(retried.letter.at), republished_to=str(retried.published))


def _position(dead_letter_id: str) -> Position:
    at = Position.parse(dead_letter_id, field="dead_letter_id")
    checked_topic(at.topic)
    return at
