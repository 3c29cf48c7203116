"""Typed memory at the API boundary: what agents retain and what recall hands back.

These models are shared by the HTTP API, the SDK and the CLI (snake_case on the
wire, like the index). A retained memory becomes an ExperienceEvent on
``experience.raw``, so the archive stays the truth; recall reads the index and
the archive.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from cogsub.core.events import (
    MAX_TAGS,
    MAX_TEXT_LENGTH,
    FactType,
    Instant,
    SafeId,
    ShortText,
    Tag,
)

MAX_QUERY_LENGTH = 4_096
MAX_RECALL_K = 100
MAX_STEPS = 100
PROCEDURE_TAG_PREFIX = "procedure:"
VERSION_TAG_PREFIX = "version:"


class BoundaryModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetainContext(BoundaryModel):
    """Who and where a memory came from (becomes the event's context)."""

    session_id: ShortText | None = None
    user_id: ShortText | None = None
    agent_id: ShortText | None = None
    trace_id: ShortText | None = None
    span_id: ShortText | None = None


class RetainRequest(BoundaryModel):
    """One memory to keep. Typed blocks (procedure … profile) are stored verbatim."""

    content: str = Field(min_length=1, max_length=MAX_TEXT_LENGTH)
    fact_type: FactType | None = None
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS - 2)
    timestamp: Instant | None = None
    context: RetainContext = Field(default_factory=RetainContext)
    memory_id: SafeId | None = Field(
        default=None, description="client-chosen id; retrying with the same id is idempotent"
    )
    steps: list[Annotated[str, Field(min_length=1, max_length=2_000)]] | None = Field(
        default=None, max_length=MAX_STEPS
    )
    rationale: ShortText | None = None
    supersedes: SafeId | None = Field(
        default=None, description="for a procedure: the memory id of the version it replaces"
    )
    wait: bool = Field(default=False, description="return only once the memory is recallable")


class RetainResult(BoundaryModel):
    memory_id: str
    bank_id: str
    fact_type: FactType | None
    object_storage_key: str
    recallable: bool
    version: int | None = None
    reinforced: bool = Field(
        default=False,
        description="the bank already held this content as this type: that memory was "
        "reinforced and its id returned, nothing new was stored",
    )


class RecallRequest(BoundaryModel):
    query: str = Field(min_length=1, max_length=MAX_QUERY_LENGTH)
    types: list[FactType] | None = None
    tags: list[Tag] | None = None
    since: Instant | None = None
    until: Instant | None = None
    k: int = Field(default=10, ge=1, le=MAX_RECALL_K)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    prefer_observations: bool = False
    session_id: ShortText | None = Field(default=None, description="for session-relative novelty")
    all_versions: bool = Field(default=False, description="every procedure version, not the newest")
    reinforce: bool = Field(
        default=True,
        description="count this retrieval toward reinforcement (off for probes and evaluations)",
    )


class ScoreBreakdown(BoundaryModel):
    """Each signal in [0, 1], its weight, and ``final`` = Σ weight × signal."""

    relevance: float
    importance: float
    recency: float
    reward: float
    reinforcement: float
    novelty: float
    type_boost: float
    weights: dict[str, float]
    final: float
    bm25_rank: int | None = None
    vector_rank: int | None = None
    bm25_score: float | None = None
    cosine: float | None = None
    lexical: float | None = Field(
        default=None, description="BM25 share of relevance, neighbours' part included, in [0, 1]"
    )
    semantic: float | None = Field(
        default=None, description="cosine share of relevance, in context, scaled to [0, 1]"
    )
    context: float | None = Field(
        default=None, description="the part of the BM25 score that came from neighbouring turns"
    )
    boost: float | None = Field(
        default=None, description="relevance multiplier from the query's cues (speaker, time)"
    )
    resolution: str | None = Field(
        default=None, description="why this memory won over the ones it supersedes"
    )
    rerank: float | None = Field(
        default=None,
        description="the reranker's score in [0, 1], weighted by weights.rerank (else null)",
    )


class MemoryHit(BoundaryModel):
    id: str
    text: str
    fact_type: FactType | None
    event_type: str
    timestamp: str
    tags: list[str]
    source_event_id: str
    object_storage_key: str
    score: float
    tokens: int
    steps: list[str] | None = None
    rationale: str | None = None
    version: int | None = None
    proof_count: int | None = None
    supersedes: list[str] = Field(default_factory=list)
    superseded_by: str | None = None
    valid_to: str | None = None
    explain: ScoreBreakdown


class RecallResponse(BoundaryModel):
    bank_id: str
    query: str
    results: list[MemoryHit]
    candidates: int
    tokens: int


class MemoryRecord(BoundaryModel):
    """One memory with the full archived event behind it."""

    id: str
    bank_id: str
    fact_type: FactType | None
    text: str
    timestamp: str
    tags: list[str]
    object_storage_key: str
    importance_score: float
    retrieval_count: int
    archived_event: dict[str, object]


def procedure_text(steps: list[str], rationale: str | None) -> str:
    """The verbatim block stored for a procedure: numbered steps, then why."""
    lines = [f"{i}. {step}" for i, step in enumerate(steps, start=1)]
    if rationale:
        lines.append(f"Rationale: {rationale}")
    return "\n".join(lines)


class ConsolidationReport(BoundaryModel):
    """What one consolidation round of a bank produced (ids of new memories)."""

    bank_id: str
    observations: list[str] = Field(default_factory=list)
    preferences: list[str] = Field(default_factory=list)
    procedures: list[str] = Field(default_factory=list)
    superseded: list[str] = Field(default_factory=list)
    reinforced: int = 0
    decayed: int = 0
    scanned: int = 0
    complete: bool = Field(
        default=True, description="False when the round stopped at its bounds; the next continues"
    )
    took_ms: int = Field(default=0, ge=0, description="Wall time of the round, in milliseconds")
    decay_ms: int = Field(
        default=0, ge=0, description="Of which the decay pass (about 0 once the epoch is done)"
    )


class FeedbackSignal(StrEnum):
    """What an agent did with a recalled memory."""

    RETURNED = "returned"
    USED = "used"
    HELPFUL = "helpful"


class FeedbackRequest(BoundaryModel):
    memory_ids: list[SafeId] = Field(min_length=1, max_length=MAX_RECALL_K)
    signal: FeedbackSignal


class FeedbackResult(BoundaryModel):
    """How many memories a feedback call updated."""

    bank_id: str
    updated: int
