"""What ingestion derives from an event: the index document and the two announcements.

The shapes are the experience-capture seed's, field for field, plus ``bank_id``
and ``fact_type`` on the index document. The index document is compact on
purpose: it never carries reasoning traces or tool output, only a pointer
(``object_storage_key``) back to the archived event.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cogsub.core.events import ExperienceEvent, FactType, WireModel, format_timestamp

EXPERIENCE_INDEX = "experience_events"
SUMMARY_LENGTH = 240
#: Characters of text past the summary that the index also searches (``detail``).
DETAIL_LENGTH = 2_000
DEFAULT_SIGNAL = 0.5


class IndexDocument(BaseModel):
    """The associative-layer row for one memory (snake_case, as in the seed)."""

    model_config = ConfigDict(extra="forbid")

    event_id: str
    timestamp: str
    event_type: str
    session_id: str | None
    summary: str
    embedding: list[float]
    importance_score: float = Field(ge=0.0, le=1.0)
    reward_score: float = Field(ge=0.0, le=1.0)
    confidence: float = Field(ge=0.0, le=1.0)
    retrieval_count: int = Field(default=0, ge=0)
    decay_factor: float = Field(default=1.0, ge=0.0, le=1.0)
    object_storage_key: str
    tags: list[str]
    bank_id: str
    fact_type: FactType | None = None
    detail: str = Field(
        default="",
        description="the text past the summary (up to DETAIL_LENGTH characters, whole words):"
        " searched beside it, never returned in its place",
    )

    def to_source(self) -> dict[str, Any]:
        """The JSON body as stored in the index: the seed's shape, ``detail`` only when some."""
        return self.model_dump(mode="json", exclude=None if self.detail else {"detail"})


class EnrichedPayload(WireModel):
    """``experience.enriched``: what consumers that extend enrichment need."""

    event_id: str
    timestamp: str
    importance_score: float
    embedding_dimension: int
    object_storage_key: str
    tags: list[str]


class IndexedPayload(WireModel):
    """``memory.indexed``: the memory row exists; here is where, and its archive pointer."""

    event_id: str
    timestamp: str
    index: str
    object_storage_key: str


def index_document_for(
    event: ExperienceEvent,
    *,
    embedding: list[float],
    importance_score: float,
    object_storage_key: str,
) -> IndexDocument:
    """The compact document the seed's split puts in the associative layer.

    Every value comes from an already-validated event (or is derived by us), so the
    document is assembled without a second validation pass on the ingestion hot path.
    """
    return IndexDocument.model_construct(
        event_id=event.event_id,
        timestamp=format_timestamp(event.timestamp),
        event_type=event.type.value,
        session_id=event.context.session_id,
        summary=event.input.text[:SUMMARY_LENGTH],
        embedding=embedding,
        importance_score=importance_score,
        reward_score=_signal(event.evaluation.reward_score if event.evaluation else None),
        confidence=_signal(event.internal_state.confidence if event.internal_state else None),
        object_storage_key=object_storage_key,
        tags=list(event.tags),
        bank_id=event.bank_id,
        fact_type=event.fact_type,
        detail=detail_of(event.input.text),
    )


def detail_of(text: str) -> str:
    """What of ``text`` the summary cuts off, bounded, so that its words are searchable too.

    It starts at the word the summary ends in (so a word the cut splits is found whole;
    one the cut falls right after is held twice) unless the summary ends in a space, and
    ends at the last whole word within ``DETAIL_LENGTH`` characters.
    """
    if len(text) <= SUMMARY_LENGTH:
        return ""
    start = SUMMARY_LENGTH
    while start > 0 and not text[start - 1].isspace():
        start -= 1  # (to 0 for a summary of one word: that word whole)
    end = start + DETAIL_LENGTH
    if end < len(text):
        while end > start and not text[end].isspace():
            end -= 1
        if end == start:  # no space in it at all: cut where the bound falls
            end = start + DETAIL_LENGTH
    return text[start:end].strip()


def indexed_text(doc: IndexDocument) -> str:
    """The memory's text as far as the index holds it: the summary, then the detail.

    The detail starts with the word the summary ends in, unless the summary ends in a
    space (``detail_of``), so that word is taken from the detail alone.
    """
    summary, detail = doc.summary, doc.detail
    if not detail:
        return summary
    words_end = len(summary.rstrip())
    if words_end < len(summary):
        return f"{summary[:words_end]} {detail}"
    starts = [at + 1 for at, char in enumerate(summary) if char.isspace()]
    return summary[: starts[-1]] + detail if starts else detail


def enriched_payload_for(doc: IndexDocument) -> EnrichedPayload:
    return EnrichedPayload.model_construct(
        event_id=doc.event_id,
        timestamp=doc.timestamp,
        importance_score=doc.importance_score,
        embedding_dimension=len(doc.embedding),
        object_storage_key=doc.object_storage_key,
        tags=doc.tags,
    )


def indexed_payload_for(doc: IndexDocument, *, index: str = EXPERIENCE_INDEX) -> IndexedPayload:
    return IndexedPayload.model_construct(
        event_id=doc.event_id,
        timestamp=doc.timestamp,
        index=index,
        object_storage_key=doc.object_storage_key,
    )


# Compact UTF-8 JSON, as pydantic writes it: no spaces, non-ASCII kept, no NaN.
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def enriched_payload_json(doc: IndexDocument) -> bytes:
    """``enriched_payload_for(doc).to_wire_json()``, written without building the model.

    The ingestion hot path announces every document; the wire shape is the
    model's, field for field and in order (a test holds the two together).
    """
    wire = {
        "eventId": doc.event_id,
        "timestamp": doc.timestamp,
        "importanceScore": doc.importance_score,
        "embeddingDimension": len(doc.embedding),
        "objectStorageKey": doc.object_storage_key,
        "tags": doc.tags,
    }
    return _COMPACT.encode(wire).encode()


def indexed_payload_json(doc: IndexDocument, *, index: str = EXPERIENCE_INDEX) -> bytes:
    """``indexed_payload_for(doc, index=index).to_wire_json()``, without building the model."""
    wire = {
        "eventId": doc.event_id,
        "timestamp": doc.timestamp,
        "index": index,
        "objectStorageKey": doc.object_storage_key,
    }
    return _COMPACT.encode(wire).encode()


def _signal(value: float | None) -> float:
    return DEFAULT_SIGNAL if value is None else value
