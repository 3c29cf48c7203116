"""What consolidation writes, as data: ids, archive keys, tags and derived events (pure).

Every derived memory (fact, observation, preference, procedure version) is an
``ExperienceEvent`` of type ``consolidation_output`` archived write-once under
``consolidation/`` and indexed like any memory. Ids and bytes are functions of
the inputs alone, so a round that runs twice — or resumes after a crash —
lands on the same objects instead of writing new ones.

Supersession is recorded twice, each in its layer's way: the archive keeps a
write-once record per superseded memory (the truth, for audit and replay); the
index carries tags (``superseded-by:``, ``valid-to:``, ``supersedes:``) so
recall can leave the loser out without an archive read.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from cogsub.core.documents import IndexDocument
from cogsub.core.events import (
    MAX_TAG_LENGTH,
    ArchivedEvent,
    EventType,
    FactType,
    format_timestamp,
)

CONSOLIDATION_PREFIX = "consolidation/"
DERIVED_TAG = "derived:"
SUPERSEDED_BY_TAG = "superseded-by:"
SUPERSEDES_TAG = "supersedes:"
VALID_TO_TAG = "valid-to:"
PROOF_TAG = "proof:"
CLUSTER_TAG = "cluster:"
TIER_TAG = "tier:"


class DerivedKind(StrEnum):
    FACT = "fact"
    OBSERVATION = "observation"
    PREFERENCE = "preference"
    PROCEDURE = "procedure"


def derived_id(kind: DerivedKind, bank_id: str, *parts: str) -> str:
    """A stable id for what ``kind`` derives from ``parts`` in ``bank_id``."""
    digest = hashlib.sha256("\x1f".join((kind.value, bank_id, *parts)).encode()).hexdigest()
    return f"{kind.value[:4]}-{digest[:24]}"


def derived_key(bank_id: str, kind: DerivedKind, memory_id: str) -> str:
    return f"{CONSOLIDATION_PREFIX}{bank_id}/{kind.value}s/{memory_id}.json"


def is_derived_memory_key(key: str) -> bool:
    """Whether ``key`` holds a derived memory (not evidence, markers or supersessions)."""
    parts = key.removeprefix(CONSOLIDATION_PREFIX).split("/")
    return (
        key.startswith(CONSOLIDATION_PREFIX)
        and len(parts) == 3
        and parts[1] in {f"{kind.value}s" for kind in DerivedKind}
    )


def evidence_key(bank_id: str, fact_id: str, source: str) -> str:
    """One write-once object per (fact, source): a fact's proof count is how many it has."""
    return f"{evidence_prefix(bank_id, fact_id)}{source}.json"


def evidence_prefix(bank_id: str, fact_id: str) -> str:
    return f"{CONSOLIDATION_PREFIX}{bank_id}/evidence/{fact_id}/"


def supersession_key(bank_id: str, loser_id: str) -> str:
    return f"{CONSOLIDATION_PREFIX}{bank_id}/supersessions/{loser_id}.json"


def consumed_key(bank_id: str, source_id: str) -> str:
    """Marks a correction as distilled (into a preference or a procedure repair)."""
    return f"{CONSOLIDATION_PREFIX}{bank_id}/consumed/{source_id}.json"


def epoch_key(bank_id: str, epoch: int) -> str:
    return f"{CONSOLIDATION_PREFIX}{bank_id}/epochs/{epoch:08d}.json"


def decay_pages_prefix(bank_id: str, epoch: int) -> str:
    """Where an epoch's decay pass records each page it has finished, until it is done."""
    return f"{CONSOLIDATION_PREFIX}{bank_id}/epochs/{epoch:08d}/pages/"


def decay_page_key(bank_id: str, epoch: int, page: int) -> str:
    return f"{decay_pages_prefix(bank_id, epoch)}{page:08d}.json"


@dataclass(frozen=True)
class DerivedMemory:
    """One memory a consolidation step wants to exist."""

    memory_id: str
    kind: DerivedKind
    fact_type: FactType
    text: str
    timestamp: datetime
    importance: float
    sources: tuple[str, ...]
    tags: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None


def tag_value(tags: list[str] | tuple[str, ...], prefix: str) -> str | None:
    return next((t.removeprefix(prefix) for t in tags if t.startswith(prefix)), None)


def tag_values(tags: list[str] | tuple[str, ...], prefix: str) -> list[str]:
    return [t.removeprefix(prefix) for t in tags if t.startswith(prefix)]


def is_superseded(doc: IndexDocument) -> bool:
    return any(t.startswith(SUPERSEDED_BY_TAG) for t in doc.tags)


def proof_count(doc: IndexDocument) -> int:
    value = tag_value(doc.tags, PROOF_TAG)
    return int(value) if value is not None and value.isdigit() else 1


def with_tags(
    doc: IndexDocument, add: list[str], *, replace: tuple[str, ...] = ()
) -> IndexDocument:
    """``doc`` with tags under the ``replace`` prefixes dropped and ``add`` appended."""
    kept = [t for t in doc.tags if not t.startswith(replace)] if replace else list(doc.tags)
    tags = list(dict.fromkeys([*kept, *(t[:MAX_TAG_LENGTH] for t in add)]))
    return doc.model_copy(update={"tags": tags})


def derived_event(bank_id: str, memory: DerivedMemory, *, key: str) -> ArchivedEvent:
    """The archived event for ``memory`` (embedding filled in later by the writer)."""
    tags = [f"{DERIVED_TAG}{memory.kind.value}", *memory.tags]
    structured = {
        "kind": memory.kind.value,
        "sources": list(memory.sources),
        **memory.details,
    }
    wire: dict[str, Any] = {
        "eventId": memory.memory_id,
        "timestamp": format_timestamp(memory.timestamp),
        "type": EventType.CONSOLIDATION_OUTPUT.value,
        "bankId": bank_id,
        "factType": memory.fact_type.value,
        "context": {"sessionId": memory.session_id} if memory.session_id else {},
        "input": {"text": memory.text, "structured": structured},
        "tags": list(dict.fromkeys(t[:MAX_TAG_LENGTH] for t in tags)),
        "importanceScore": round(memory.importance, 6),
        "objectStorageKey": key,
    }
    return ArchivedEvent.model_validate(wire)
