"""Pure steps of Stage 1 ingestion: no I/O, so every rule is tested without servers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from cogsub.bus.dead_letters import DLQ_KIND_HEADER as DLQ_KIND_HEADER  # their old home
from cogsub.bus.dead_letters import DLQ_REASON_HEADER as DLQ_REASON_HEADER
from cogsub.bus.dead_letters import DLQ_SOURCE_HEADER as DLQ_SOURCE_HEADER
from cogsub.bus.dead_letters import DeadLetter
from cogsub.bus.ports import Record
from cogsub.core.errors import FieldProblem, InvalidEventError
from cogsub.core.events import ArchivedEvent, ExperienceEvent, parse_event
from cogsub.core.topics import EXPERIENCE_RAW_DLQ

# Fields ingestion derives; two events that differ only here are the same experience.
_DERIVED_FIELDS = ("importanceScore", "objectStorageKey")


class Stage(StrEnum):
    """The ordered boundaries of one ingestion pass (the seed's trace stages)."""

    RECEIVE = "receive"
    EMBED = "embed"
    SCORE = "score"
    KEY = "key"
    ARCHIVE = "archive"
    INDEX = "index"
    EMIT = "emit"
    COMMIT = "commit"


class RejectionKind(StrEnum):
    INVALID = "invalid"
    CONFLICT = "conflict"
    FAILED = "failed"


@dataclass(frozen=True)
class Rejection:
    """A record that goes to the dead-letter topic, and why."""

    record: Record
    kind: RejectionKind
    reason: str


@dataclass(frozen=True)
class Accepted:
    record: Record
    event: ExperienceEvent


def receive(record: Record, *, dimension: int) -> Accepted | Rejection:
    """Parse and validate one raw record against the schema and the embedder's dimension."""
    try:
        event = parse_event(record.value)
    except InvalidEventError as exc:
        return Rejection(record, RejectionKind.INVALID, str(exc))
    supplied = len(event.input.embedding)
    if supplied and supplied != dimension:
        problem = FieldProblem(
            "input.embedding", f"must be empty or have {dimension} dimensions, got {supplied}"
        )
        return Rejection(record, RejectionKind.INVALID, str(problem))
    return Accepted(record, event)


def archived_event_for(
    event: ExperienceEvent, *, embedding: list[float], importance_score: float, key: str
) -> ArchivedEvent:
    """The full event as the archive keeps it: embedding filled in, score and key set.

    ``event`` is already validated and the derived values are ours, so the parts
    are assembled without validating the whole event a second time.
    """
    fields = {name: getattr(event, name) for name in type(event).model_fields}
    fields["input"] = event.input.model_copy(update={"embedding": embedding})
    fields["importance_score"] = importance_score
    return ArchivedEvent.model_construct(
        _fields_set={*event.model_fields_set, "input", "importance_score", "object_storage_key"},
        **fields,
        object_storage_key=key,
    )


def archive_body(archived: ArchivedEvent) -> bytes:
    """Compact UTF-8 JSON of the archived event, wire field names."""
    return archived.to_wire_json()


def same_experience(incoming: ExperienceEvent, archived: ArchivedEvent) -> bool:
    """Whether ``archived`` holds ``incoming`` (ignoring what ingestion derived)."""
    return _comparable(incoming.to_wire(), keep_embedding=bool(incoming.input.embedding)) == (
        _comparable(archived.to_wire(), keep_embedding=bool(incoming.input.embedding))
    )


def _comparable(wire: dict[str, Any], *, keep_embedding: bool) -> dict[str, Any]:
    body = {k: v for k, v in wire.items() if k not in _DERIVED_FIELDS}
    if not keep_embedding:
        body["input"] = {k: v for k, v in body["input"].items() if k != "embedding"}
    return body


def dead_letter_for(rejection: Rejection) -> DeadLetter:
    """The letter to experience.raw.dlq: the record as it came, with why and from where."""
    record, kind, reason = rejection.record, rejection.kind.value, rejection.reason
    return DeadLetter.of(EXPERIENCE_RAW_DLQ, record, kind, reason)


def first_of_each_id(accepted: Sequence[Accepted]) -> tuple[list[Accepted], list[Accepted]]:
    """Split a batch into the first record of each memory and the repeats after it.

    A memory is (bank, event id): two banks' ``invoice-7`` are two firsts.
    """
    seen: set[tuple[str, str]] = set()
    firsts: list[Accepted] = []
    repeats: list[Accepted] = []
    for item in accepted:
        identity = (item.event.bank_id, item.event.event_id)
        (repeats if identity in seen else firsts).append(item)
        seen.add(identity)
    return firsts, repeats
