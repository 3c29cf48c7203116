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
    with_tags,
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

    async def write(self, bank_id: str, memories: Sequence[DerivedMemory]) -> list[Written]:
        """Make each memory exist once; already complete ones are left as they are."""
        if not memories:
            return []
        vectors = await self._embedder.embed([m.text for m in memories])
        return [
            await self._write_one(bank_id, memory, vector)
            for memory, vector in zip(memories, vectors, strict=True)
        ]

    async def _write_one(self, bank_id: str, memory: DerivedMemory, vector: list[float]) -> Written:
        key = derived_key(bank_id, memory.kind, memory.memory_id)
        archived = derived_event(bank_id, memory, key=key)
        archived = archived.model_copy(
            update={"input": archived.input.model_copy(update={"embedding": vector})}
        )
        created = True
        try:
            await self._archive.put_once(key, archived.to_wire_json())
        except ObjectExistsError:
            created = False
            archived = ArchivedEvent.model_validate_json(await self._archive.get(key))
            if await self._index.get(bank_id, memory.memory_id) is not None:
                return Written(memory.memory_id, key, created=False)
        await self._announce(bank_id, archived, key)
        await self._index.upsert([_document(archived, key)])
        log.info(
            "consolidation_memory_written",
            bank_id=bank_id,
            memory_id=memory.memory_id,
            kind=memory.kind.value,
            resumed=not created,
        )
        return Written(memory.memory_id, key, created=created)

    async def _announce(self, bank_id: str, archived: ArchivedEvent, key: str) -> None:
        structured = (
            archived.input.structured if isinstance(archived.input.structured, dict) else {}
        )
        payload = {
            "bankId": bank_id,
            "memoryId": archived.event_id,
            "kind": structured.get("kind"),
            "factType": archived.fact_type.value if archived.fact_type else None,
            "objectStorageKey": key,
            "sources": structured.get("sources", []),
            "timestamp": format_timestamp(archived.timestamp),
        }
        body = json.dumps(payload, separators=(",", ":")).encode()
        await self._bus.publish(MEMORY_SEMANTIC_UPDATED, body, key=bank_id.encode())

    async def supersede(
        self, bank_id: str, loser_id: str, winner_id: str, *, valid_to: datetime, rule: str
    ) -> bool:
        """Mark ``loser_id`` superseded by ``winner_id`` (never deleted); True if newly so."""
        loser = await self._index.get(bank_id, loser_id)
        if loser is None:
            return False
        record: dict[str, object] = {
            "bankId": bank_id,
            "memoryId": loser_id,
            "supersededBy": winner_id,
            "validTo": format_timestamp(valid_to),
            "rule": rule,
        }
        try:
            await self._archive.put_once(
                supersession_key(bank_id, loser_id), json.dumps(record, sort_keys=True).encode()
            )
        except ObjectExistsError:
            record = json.loads(await self._archive.get(supersession_key(bank_id, loser_id)))
        # The winner is tagged first: a loser still live after a crash is found again by
        # the next round, while a superseded loser would never lead it back to the winner.
        winner = await self._index.get(bank_id, str(record["supersededBy"]))
        if winner is not None and f"{SUPERSEDES_TAG}{loser_id}" not in winner.tags:
            await self._index.upsert([with_tags(winner, [f"{SUPERSEDES_TAG}{loser_id}"])])
        newly = not is_superseded(loser)
        if newly:
            await self._index.upsert([_superseded(loser, record)])
        return newly

    async def supersession(self, bank_id: str, loser_id: str) -> dict[str, object] | None:
        """The archived supersession record of ``loser_id``, if it was superseded."""
        try:
            found = json.loads(await self._archive.get(supersession_key(bank_id, loser_id)))
        except NotFoundError:
            return None
        return found if isinstance(found, dict) else None

    async def reinforce(self, bank_id: str, memory_ids: Sequence[str]) -> None:
        """Replay counts as a retrieval: bump each source's ``retrieval_count``."""
        for memory_id in memory_ids:
            try:
                await self._index.update(
                    bank_id, memory_id, DocumentPatch(retrieval_count_increment=1)
                )
            except NotFoundError:
                log.warning("consolidation_source_missing", bank_id=bank_id, memory_id=memory_id)


def _document(archived: ArchivedEvent, key: str) -> IndexDocument:
    return index_document_for(
        archived,
        embedding=list(archived.input.embedding),
        importance_score=archived.importance_score,
        object_storage_key=key,
    )


def _superseded(doc: IndexDocument, record: dict[str, object]) -> IndexDocument:
    return with_tags(
        doc,
        [f"{SUPERSEDED_BY_TAG}{record['supersededBy']}", f"{VALID_TO_TAG}{record['validTo']}"],
    )
