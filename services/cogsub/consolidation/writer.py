"""Making derived memories real: archive once, announce, index; and marking supersession.

Order per memory: ``put_once`` (the truth) → announce on ``memory.semantic.updated``
→ index. A crash anywhere leaves the object in the archive; the next round finds
it (same id, same key), announces again (at-least-once) and indexes it, so an
indexed memory has always been announced and nothing archived is left unindexed.
"""

from __future__ import annotations

import asyncio
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
        wanted = [
            _with_vector(
                derived_event(bank_id, m, key=derived_key(bank_id, m.kind, m.memory_id)), v
            )
            for m, v in zip(memories, vectors, strict=True)
        ]
        # One batch: the puts share the archive's group sync, the announcements the
        # log's group commit, and the index takes one bulk upsert.
        stored = await asyncio.gather(*(self._store(archived) for archived in wanted))
        pending = [archived for archived, complete, _ in stored if not complete]
        await asyncio.gather(*(self._announce(bank_id, a, a.object_storage_key) for a in pending))
        if pending:
            await self._index.upsert([_document(a, a.object_storage_key) for a in pending])
        for archived in pending:
            log.debug("consolidation_memory_written", bank_id=bank_id, memory_id=archived.event_id)
        return [
            Written(archived.event_id, archived.object_storage_key, created=created)
            for archived, _, created in stored
        ]

    async def _store(self, archived: ArchivedEvent) -> tuple[ArchivedEvent, bool, bool]:
        """(the archived object, whether it is complete already, whether this call created it)."""
        key = archived.object_storage_key
        try:
            await self._archive.put_once(key, archived.to_wire_json())
            return archived, False, True
        except ObjectExistsError:
            stored = ArchivedEvent.model_validate_json(await self._archive.get(key))
            indexed = await self._index.get(stored.bank_id, stored.event_id) is not None
            return stored, indexed, False

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

    async def reinforce(self, bank_id: str, memory_ids: Sequence[str]) -> None:
        """Replay counts as a retrieval: bump each source's ``retrieval_count``."""
        for memory_id in memory_ids:
            try:
                await self._index.update(
                    bank_id, memory_id, DocumentPatch(retrieval_count_increment=1)
                )
            except NotFoundError:
                log.warning("consolidation_source_missing", bank_id=bank_id, memory_id=memory_id)


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


def _superseded(doc: IndexDocument, record: dict[str, object]) -> IndexDocument:
    return with_tags(
        doc,
        [f"{SUPERSEDED_BY_TAG}{record['supersededBy']}", f"{VALID_TO_TAG}{record['validTo']}"],
    )
