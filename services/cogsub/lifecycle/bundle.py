"""The bank export format, version 1: JSON lines, each one self-describing (pure).

    {"format": "cogsub-bank-export", "version": 1, "bank_id": …, "exported_at": …,
     "counts": {"memories": N, "records": M}}                                   header
    {"key": "events/2026/05/20/m1.json", "object": {…archived event…},
     "index": {"tags": […], "importance_score": …, "decay_factor": …,
               "retrieval_count": …}}                                            a memory
    {"key": "consolidation/jane/supersessions/m0.json", "object": {…}}           a record
    {"end": true, "lines": N + M, "memories": N, "records": M, "skipped": 0}     trailer

A memory line carries its archived object verbatim (embedding included, so an
import never embeds again) and the index state that is not in the archive:
tags (supersession, proof, version), importance, decay and retrieval count, so
recall after an import ranks exactly as before the export. A record line is any
other object of the bank: consolidation bookkeeping (evidence, supersessions,
consumed corrections, decay epochs, derived memories the index lacks) and the
bank's audit records. The header's counts are what the export expected to
write; the trailer says what it wrote — a file without it was cut short.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from cogsub.core.derived import is_derived_memory_key
from cogsub.core.documents import IndexDocument, index_document_for
from cogsub.core.errors import FieldProblem, InvalidInputError
from cogsub.core.events import ArchivedEvent, SafeId, problems_from
from cogsub.core.keys import EVENTS_PREFIX, legacy_object_key_for, object_key_for
from cogsub.core.lifecycle import ImportReport as ImportReport
from cogsub.core.lifecycle import LineProblem as LineProblem
from cogsub.lifecycle.provenance import bank_prefix
from cogsub.lifecycle.records import is_audit_record_key

EXPORT_FORMAT = "cogsub-bank-export"
EXPORT_VERSION = 1
MAX_LINE_BYTES = 4 * 1_048_576
MAX_PROBLEMS = 100


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExportHeader(_Line):
    format: Literal["cogsub-bank-export"]
    version: Literal[1]
    bank_id: SafeId
    exported_at: str
    counts: dict[str, int] = Field(default_factory=dict)


class IndexState(_Line):
    """What the index knows of a memory beyond its archived object."""

    tags: list[str]
    importance_score: float = Field(ge=0.0, le=1.0)
    decay_factor: float = Field(ge=0.0, le=1.0)
    retrieval_count: int = Field(ge=0)


class ExportObject(_Line):
    key: str = Field(min_length=1, max_length=1_024)
    object: dict[str, JsonValue]
    index: IndexState | None = None


class ExportTrailer(_Line):
    end: Literal[True]
    lines: int = Field(ge=0)
    memories: int = Field(ge=0)
    records: int = Field(ge=0)
    skipped: int = Field(default=0, ge=0)


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def header_line(bank_id: str, *, exported_at: str, counts: dict[str, int]) -> bytes:
    header = ExportHeader(
        format=EXPORT_FORMAT,
        version=EXPORT_VERSION,
        bank_id=bank_id,
        exported_at=exported_at,
        counts=counts,
    )
    return header.model_dump_json().encode() + b"\n"


def index_state(doc: IndexDocument) -> dict[str, object]:
    return {
        "tags": list(doc.tags),
        "importance_score": doc.importance_score,
        "decay_factor": doc.decay_factor,
        "retrieval_count": doc.retrieval_count,
    }


def object_line(key: str, body: bytes, doc: IndexDocument | None) -> bytes | None:
    """The line for one archived object, or None if the object is not a JSON object."""
    try:
        found = json.loads(body)
    except ValueError:
        return None
    if not isinstance(found, dict):
        return None
    line: dict[str, object] = {"key": key, "object": found}
    if doc is not None:
        line["index"] = index_state(doc)
    return _dumps(line) + b"\n"


def trailer_line(*, memories: int, records: int, skipped: int) -> bytes:
    trailer = ExportTrailer(
        end=True, lines=memories + records, memories=memories, records=records, skipped=skipped
    )
    return trailer.model_dump_json().encode() + b"\n"


def _decoded(raw: bytes | str) -> object:
    if len(raw) > MAX_LINE_BYTES:
        raise InvalidInputError([FieldProblem("(line)", f"must be at most {MAX_LINE_BYTES} bytes")])
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidInputError([FieldProblem("(line)", f"must be JSON: {exc}")]) from None


def parse_header(raw: bytes | str) -> ExportHeader:
    """The first line; InvalidInputError if it is not a version-1 header."""
    found = _decoded(raw)
    if not isinstance(found, dict) or found.get("format") != EXPORT_FORMAT:
        raise InvalidInputError(
            [FieldProblem("(header)", f"the first line must be a {EXPORT_FORMAT} header")]
        )
    if found.get("version") != EXPORT_VERSION:
        raise InvalidInputError(
            [FieldProblem("version", f"this server reads version {EXPORT_VERSION} exports")]
        )
    try:
        return ExportHeader.model_validate(found)
    except ValidationError as exc:
        raise InvalidInputError(_problems(exc)) from None


def parse_body_line(raw: bytes | str) -> ExportObject | ExportTrailer:
    """An object line or the trailer; InvalidInputError otherwise."""
    found = _decoded(raw)
    model: type[ExportObject | ExportTrailer] = (
        ExportTrailer if isinstance(found, dict) and "end" in found else ExportObject
    )
    try:
        return model.model_validate(found)
    except ValidationError as exc:
        raise InvalidInputError(_problems(exc)) from None


def checked_memory(bank_id: str, line: ExportObject) -> ArchivedEvent | None:
    """The archived memory a line holds (None for a record); InvalidInputError if misplaced.

    A line may only put objects where the bank's own objects live: raw events at
    their deterministic key, and anything under ``consolidation/{bank}/`` or
    ``audit/{bank}/`` (pending plans excepted).
    """
    key = line.key
    if ".." in key or key.startswith("/") or "//" in key or "\\" in key or "\x00" in key:
        raise _misplaced(f"{key!r} is not a plain relative key")
    raw = key.startswith(EVENTS_PREFIX)
    derived = is_derived_memory_key(key) and key.startswith(bank_prefix(bank_id))
    if not raw and not derived:
        if key.startswith(bank_prefix(bank_id)) or is_audit_record_key(bank_id, key):
            if line.index is not None:
                raise _misplaced("only memories carry index state")
            return None
        raise _misplaced(f"{key!r} is not an object of bank {bank_id!r}")
    try:
        event = ArchivedEvent.model_validate(line.object)
    except ValidationError as exc:
        raise InvalidInputError(problems_from(exc)) from None
    if event.bank_id != bank_id:
        raise _misplaced(f"the memory belongs to bank {event.bank_id!r}")
    # A bundle from a store before per-bank keys holds raw events at their legacy key.
    expected = {object_key_for(event), legacy_object_key_for(event)} if raw else {key}
    if (
        event.object_storage_key != key
        or key not in expected
        or not key.endswith(f"/{event.event_id}.json")
    ):
        raise _misplaced(f"{key!r} is not where memory {event.event_id!r} is archived")
    return event


def at_current_key(line: ExportObject, event: ArchivedEvent) -> tuple[ExportObject, ArchivedEvent]:
    """A raw event exported from a store before per-bank keys, moved to its key of today.

    Its old key is the one every bank shared (and the default bank's key today):
    imported there, one bank's bundle could take, or probe, another bank's id.
    """
    current = object_key_for(event)
    if line.key == current or not line.key.startswith(EVENTS_PREFIX):
        return line, event
    moved = {**line.object, "objectStorageKey": current}
    return (
        line.model_copy(update={"key": current, "object": moved}),
        event.model_copy(update={"object_storage_key": current}),
    )


def imported_document(event: ArchivedEvent, state: IndexState) -> IndexDocument:
    """The document the pipeline built for ``event``, with its exported index state."""
    doc = index_document_for(
        event,
        embedding=list(event.input.embedding),
        importance_score=state.importance_score,
        object_storage_key=event.object_storage_key,
    )
    return doc.model_copy(
        update={
            "tags": list(state.tags),
            "decay_factor": state.decay_factor,
            "retrieval_count": state.retrieval_count,
        }
    )


def body_of(line: ExportObject) -> bytes:
    """The bytes an import writes for a line's object."""
    return _dumps(line.object)


def _misplaced(rule: str) -> InvalidInputError:
    return InvalidInputError([FieldProblem("key", rule)])


def _problems(exc: ValidationError) -> list[FieldProblem]:
    return [
        FieldProblem(".".join(str(p) for p in e["loc"]) or "(line)", e["msg"])
        for e in exc.errors(include_url=False)
    ]
