"""Turning a retain request into the ExperienceEvent that carries it (pure)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cogsub.core.errors import FieldProblem, InvalidInputError
from cogsub.core.events import (
    MAX_EVENT_BYTES,
    EventType,
    ExperienceEvent,
    FactType,
    validate_event,
)
from cogsub.core.memory import PROCEDURE_TAG_PREFIX, VERSION_TAG_PREFIX, RetainRequest

_AGENT_WRITTEN = frozenset({FactType.PROCEDURE, FactType.REASONING, FactType.EXPERIENCE})


@dataclass(frozen=True)
class ProcedureLineage:
    """Where a procedure version stands: its procedure id and version number."""

    procedure_id: str
    version: int


def new_memory_id() -> str:
    return f"mem-{uuid.uuid4().hex}"


def same_content_key(text: str) -> str:
    """What two texts must share to be the same memory: words alike up to whitespace and case."""
    return " ".join(text.split()).casefold()


def event_type_for(fact_type: FactType | None) -> EventType:
    """Agent-written blocks are agent actions; everything else arrives as input."""
    return EventType.AGENT_ACTION if fact_type in _AGENT_WRITTEN else EventType.USER_INPUT


def event_for(
    bank_id: str,
    request: RetainRequest,
    *,
    memory_id: str,
    now: datetime | None = None,
    lineage: ProcedureLineage | None = None,
) -> ExperienceEvent:
    """The event on experience.raw that makes ``request`` part of bank ``bank_id``."""
    tags = list(dict.fromkeys(request.tags))
    structured: dict[str, Any] | None = None
    if request.fact_type is FactType.PROCEDURE or request.steps is not None:
        lineage = lineage or ProcedureLineage(procedure_id=memory_id, version=1)
        tags += [
            f"{PROCEDURE_TAG_PREFIX}{lineage.procedure_id}",
            f"{VERSION_TAG_PREFIX}{lineage.version}",
        ]
        structured = {
            "steps": list(request.steps or []),
            "rationale": request.rationale,
            "procedureId": lineage.procedure_id,
            "version": lineage.version,
            "supersedes": request.supersedes,
        }
    elif request.rationale is not None:
        structured = {"rationale": request.rationale}
    context = request.context.model_dump(exclude_none=True)
    wire: dict[str, Any] = {
        "eventId": memory_id,
        "timestamp": (request.timestamp or now or datetime.now(UTC)).isoformat(),
        "type": event_type_for(request.fact_type).value,
        "bankId": bank_id,
        "context": {_camel(k): v for k, v in context.items()},
        "input": {"text": request.content, **({"structured": structured} if structured else {})},
        "tags": tags,
    }
    if request.fact_type is not None:
        wire["factType"] = request.fact_type.value
    event = validate_event(wire)
    if len(event.to_wire_json()) > MAX_EVENT_BYTES:
        # Ingestion refuses a larger record: refuse it here, before it is acknowledged.
        rule = f"with its steps, tags and context must fit an event of {MAX_EVENT_BYTES} bytes"
        raise InvalidInputError([FieldProblem("content", rule)])
    return event


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)
