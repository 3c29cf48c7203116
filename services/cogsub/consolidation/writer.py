"""Making derived memories real: archive once, announce, index; and marking supersession.

Order per memory: ``put_once`` (the truth) → announce on ``memory.semantic.updated``
→ index. A crash anywhere leaves the object in the archive; the next round finds
it (same id, same key), announces again (at-least-once) and indexes it, so an
indexed memory has always been announced and nothing archived is left unindexed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import structlog

from cogsub.archive.ports import ArchiveStore
from cogsub.bulk import Outgoing, publish_all, put_all
from cogsub.bus.ports import EventBus
from cogsub.core.derived import (
    SUPERSEDED_BY_TAG,
    SUPERSEDES_TAG,
    VALID_TO_TAG,
    DerivedMemory,
    derived_event,
    derived_key,
    is_superseded,
    supersession_key,
)
from cogsub.core.documents import IndexDocument, index_document_for
from cogsub.core.errors import NotFoundError, ObjectExistsError
from cogsub.core.events import ArchivedEvent, format_timestamp
from cogsub.core.topics import MEMORY_SEMANTIC_UPDATED
from cogsub.embeddings.ports import Embedder
from cogsub.index.ports import DocumentPatch, MemoryIndex

log = structlog.get_logger("cogsub.consolidation")


@dataclass(frozen=True)
class Written:
    """What one write did: ``created`` is False when a previous round already archived it."""

    memory_id: str
    object_storage_key: str
    created: bool


class DerivedWriter:
    """Archive, announce and index derived memories; mark the ones they supersede."""

    def __init__(
        self, *, bus: EventBus, archive: ArchiveStore, index: MemoryIndex, embedder: Embedder
    ) -> None:
        self._bus = bus
        self._archive = archive
        self._index = index
        self._embedder = embedder

    async def write(
        self,
        bank_id: str,
        memories: Sequence[DerivedMemory],
        *,
        vectors: Sequence[list[float]] | None = None,
    ) -> list[Written]:
        """Make each memory exist once; already complete ones are left as they are.

        ``vectors`` are the memories' embeddings when the caller has them already.
        """
        if not memories:
            return []
        if vectors is None:
            vectors = await self._embedder.embed([m.text for m in memories])
        return await self.write_across(
            [(bank_id, m, v) for m, v in zip(memories, vectors, strict=True)]
        )

    async def write_across(
        self, entries: Sequence[tuple[str, DerivedMemory, list[float]]]
    ) -> list[Written]:
        """``write`` for ``(bank_id, memory, vector)`` entries of any banks, all at once."""
        wanted = [
            _with_vector(derived_event(bank, m, key=derived_key(bank, m.kind, m.memory_id)), v)
            for bank, m, v in entries
        ]
        # One batch: the puts take one bulk call (one durability step on the embedded
        # archive), the announcements one append, and the index one bulk upsert.
        stored = await self._store_all(wanted)
        pending = [archived for archived, complete, _ in stored if not complete]
        await publish_all(self._bus, [_announcement(a) for a in pending])
        if pending:
            await self._index.upsert([_document(a, a.object_storage_key) for a in pending])
        for a in pending:
            log.debug("consolidation_memory_written", bank_id=a.bank_id, memory_id=a.event_id)
        return [
            Written(archived.event_id, archived.object_storage_key, created=created)
            for archived, _, created in stored
        ]

    async def _store_all(
        self, wanted: Sequence[ArchivedEvent]
    ) -> list[tuple[ArchivedEvent, bool, bool]]:
        """Per object: (the archived object, whether it is complete already, whether it is new)."""
        outcomes = await put_all(
            self._archive, [(a.object_storage_key, a.to_wire_json()) for a in wanted]
        )
        stored: list[tuple[ArchivedEvent, bool, bool]] = []
        for archived, outcome in zip(wanted, outcomes, strict=True):
            if outcome is None:
                stored.append((archived, False, True))
            elif isinstance(outcome, ObjectExistsError):
                stored.append(await self._existing(archived.object_storage_key))
            else:
                raise outcome
        return stored

    async def _existing(self, key: str) -> tuple[ArchivedEvent, bool, bool]:
        """What an earlier write (a round that crashed, a redelivery) left under ``key``."""
        stored = ArchivedEvent.model_validate_json(await self._archive.get(key))
        indexed = await self._index.get(stored.bank_id, stored.event_id) is not None
        return stored, indexed, False

    async def supersede(
        self, bank_id: str, loser_id: str, winner_id: str, *, valid_to: datetime, rule: str
    ) -> bool:
        """Mark ``loser_id`` superseded by ``winner_id`` (never deleted); True if newly so."""
        loser = await self._index.get(bank_id, loser_id)
        if loser is None:
            return False
        record = await self.claim(bank_id, loser_id, winner_id, valid_to=valid_to, rule=rule)
        # The winner is tagged first: a loser still live after a crash is found again by
        # the next round, while a superseded loser would never lead it back to the winner.
        # Tag patches, not whole documents written back: a decay or reinforcement
        # committed since the reads above is kept.
        winner_id = str(record["supersededBy"])
        winner = await self._index.get(bank_id, winner_id)
        if winner is not None and f"{SUPERSEDES_TAG}{loser_id}" not in winner.tags:
            await self._tag(bank_id, winner_id, f"{SUPERSEDES_TAG}{loser_id}")
        newly = not is_superseded(loser)
        if newly:
            await self._tag(
                bank_id,
                loser_id,
                f"{SUPERSEDED_BY_TAG}{winner_id}",
                f"{VALID_TO_TAG}{record['validTo']}",
            )
        return newly

    async def claim(
        self, bank_id: str, loser_id: str, winner_id: str, *, valid_to: datetime, rule: str
    ) -> dict[str, object]:
        """The supersession record of ``loser_id``: written now naming ``winner_id`` unless
        one is stored already, in which case that one (and its winner) stands.

        ``put_once`` is atomic, so of concurrent claims exactly one is stored.
        """
        record: dict[str, object] = {
            "bankId": bank_id,
            "memoryId": loser_id,
            "supersededBy": winner_id,
            "validTo": format_timestamp(valid_to),
            "rule": rule,
        }
        key = supersession_key(bank_id, loser_id)
        try:
            await self._archive.put_once(key, json.dumps(record, sort_keys=True).encode())
        except ObjectExistsError:
            stored: dict[str, object] = json.loads(await self._archive.get(key))
            return stored
        return record

    async def _tag(self, bank_id: str, memory_id: str, *tags: str) -> None:
        try:
            await self._index.update(bank_id, memory_id, DocumentPatch(add_tags=tags))
        except NotFoundError:
            log.warning("consolidation_tag_target_gone", bank_id=bank_id, memory_id=memory_id)

    async def reinforce(self, bank_id: str, memory_ids: Sequence[str]) -> None:
        """Replay counts as a retrieval: bump each source's ``retrieval_count``."""
        patch = DocumentPatch(retrieval_count_increment=1)
        found = await self._index.update_many(bank_id, dict.fromkeys(memory_ids, patch))
        if found < len(set(memory_ids)):
            log.warning(
                "consolidation_source_missing",
                bank_id=bank_id,
                missing=len(set(memory_ids)) - found,
            )


def _announcement(archived: ArchivedEvent) -> Outgoing:
    """The ``memory.semantic.updated`` record of a derived memory."""
    bank_id = archived.bank_id
    structured = archived.input.structured if isinstance(archived.input.structured, dict) else {}
    payload = {
        "bankId": bank_id,
        "memoryId": archived.event_id,
        "kind": structured.get("kind"),
        "factType": archived.fact_type.value if archived.fact_type else None,
        "objectStorageKey": archived.object_storage_key,
        "sources": structured.get("sources", []),
        "timestamp": format_timestamp(archived.timestamp),
    }
    body = json.dumps(payload, separators=(",", ":")).encode()
    return (MEMORY_SEMANTIC_UPDATED, body, bank_id.encode(), ())


def _with_vector(archived: ArchivedEvent, vector: list[float]) -> ArchivedEvent:
    return archived.model_copy(
        update={"input": archived.input.model_copy(update={"embedding": vector})}
    )


def _document(archived: ArchivedEvent, key: str) -> IndexDocument:
    return index_document_for(
        archived,
        embedding=list(archived.input.embedding),
        importance_score=archived.importance_score,
        object_storage_key=key,
    )
