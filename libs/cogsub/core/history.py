"""A memory's lineage as the archive tells it, and the request that makes a new version.

``MemoryHistory`` answers "where did this come from, and what became of it":
the versions of a procedure (or of any memory updated through
``PUT /v1/banks/{bank_id}/memories/{memory_id}``), the supersession records
naming it with the rule that decided each, the memories and raw events an
observation or merged fact was proved by, the corrections a preference or
procedure repair was distilled from, and its ranking signals now. One model
for the API, the SDKs and the CLI.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from cogsub.core.events import (
    MAX_TAGS,
    MAX_TEXT_LENGTH,
    FactType,
    Instant,
    SafeId,
    ShortText,
    Tag,
)
from cogsub.core.memory import MAX_STEPS, BoundaryModel, MemoryRecord

UPDATE_RULE = "update"


class SupersessionRecord(BoundaryModel):
    """One archived decision: ``memory_id`` lost to ``superseded_by`` under ``rule``."""

    memory_id: str
    superseded_by: str
    rule: str = Field(description="why: `update`, `explicit correction > …`, `procedure version`")
    valid_to: str | None = Field(description="until when the loser held (null if not recorded)")


class MemoryVersion(BoundaryModel):
    """One version in a memory's line, oldest first."""

    memory_id: str
    version: int = Field(ge=1)
    timestamp: str | None
    text: str | None = Field(description="null when this version was forgotten")
    superseded_by: str | None = None
    current: bool = Field(description="the version recall returns")


class LinkedMemory(BoundaryModel):
    """A memory another was derived from or proved by, with the raw event behind it."""

    memory_id: str
    relation: Literal["source", "evidence", "correction"]
    fact_type: FactType | None = None
    text: str | None = Field(default=None, description="null when it was forgotten")
    timestamp: str | None = None
    event_id: str | None = Field(
        default=None, description="the raw event it came from (its own id when retained as is)"
    )


class MemorySignals(BoundaryModel):
    """The memory's ranking signals as the index holds them now."""

    importance_score: float
    decay_factor: float = Field(description="1.0 fresh; decay epochs lower it toward the floor")
    retrieval_count: int = Field(description="recalls, feedback and consolidation replays so far")
    reward_score: float
    confidence: float
    proof_count: int | None = Field(
        default=None, description="for observations and merged facts: the evidence objects"
    )
    superseded: bool


class MemoryHistory(BoundaryModel):
    bank_id: str
    memory_id: str
    memory: MemoryRecord
    kind: str | None = Field(
        description="what consolidation derived it as (fact, observation, preference, "
        "procedure); null for a retained memory"
    )
    versions: list[MemoryVersion] = Field(
        description="the version line this memory belongs to, oldest first (one entry when none)"
    )
    superseded_by: SupersessionRecord | None = Field(description="what replaced it, by which rule")
    supersedes: list[SupersessionRecord] = Field(description="what it replaced, by which rule")
    sources: list[LinkedMemory] = Field(description="what it was derived from")
    evidence: list[LinkedMemory] = Field(description="memories that said it again (proof)")
    corrections: list[LinkedMemory] = Field(description="the corrections it was distilled from")
    signals: MemorySignals | None = Field(
        description="null when the memory is archived but no longer indexed"
    )


class MemoryUpdate(BoundaryModel):
    """A new version of a memory: the typed block's own fields, the rest carried over.

    ``content`` for every type but procedures, ``steps`` (and ``rationale``) for
    procedures; tags and context default to the old version's.
    """

    content: str | None = Field(default=None, min_length=1, max_length=MAX_TEXT_LENGTH)
    steps: list[Annotated[str, Field(min_length=1, max_length=2_000)]] | None = Field(
        default=None, min_length=1, max_length=MAX_STEPS
    )
    rationale: ShortText | None = None
    tags: list[Tag] | None = Field(default=None, max_length=MAX_TAGS - 4)
    timestamp: Instant | None = Field(default=None, description="of the new version; default now")
    memory_id: SafeId | None = Field(default=None, description="id of the new version")
    wait: bool = Field(default=False, description="return only once the new version is recallable")
