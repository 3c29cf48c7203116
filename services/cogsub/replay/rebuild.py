"""Re-derive the index from the archive alone: the truth layer made usable for replay.

Archived events already carry their embedding, importance score and key, so
rebuilding is reading, shaping and bulk upserting; nothing is embedded again.
Upserts are idempotent by event id, so a replay can be repeated or resumed
after an interruption from the last key it reported done (keys are listed in
lexicographic order, which is also day order).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import structlog

from cogsub.archive.ports import ArchiveStore
from cogsub.bus.ports import EventBus
from cogsub.core.documents import IndexDocument, index_document_for, indexed_payload_for
from cogsub.core.events import ArchivedEvent
from cogsub.core.keys import EVENTS_PREFIX
from cogsub.core.topics import MEMORY_INDEXED
from cogsub.index.ports import MemoryIndex

log = structlog.get_logger("cogsub.replay")

BATCH = 500


@dataclass(frozen=True)
class ReplayFilter:
    """Which archived events to replay; ``since`` inclusive, ``until`` exclusive."""

    bank_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def admits(self, event: ArchivedEvent) -> bool:
        if self.bank_id is not None and event.bank_id != self.bank_id:
            return False
        if self.since is not None and event.timestamp < self.since:
            return False
        return not (self.until is not None and event.timestamp >= self.until)

    def may_hold(self, key: str) -> bool:
        """Cheap skip by the key's day, before reading the object."""
        day = key.removeprefix(EVENTS_PREFIX)[:10].replace("/", "-")
        if self.since is not None and day < self.since.date().isoformat():
            return False
        return not (self.until is not None and day > self.until.date().isoformat())


@dataclass
class ReplayReport:
    scanned: int = 0
    indexed: int = 0
    last_key: str | None = None


async def replay(
    archive: ArchiveStore,
    index: MemoryIndex,
    *,
    only: ReplayFilter | None = None,
    after_key: str | None = None,
    announce_to: EventBus | None = None,
    on_progress: Callable[[ReplayReport], None] | None = None,
) -> ReplayReport:
    """Index every admitted archived event (keys after ``after_key``), in bulk."""
    only = only or ReplayFilter()
    report = ReplayReport()
    pending: list[str] = []
    async for key in archive.list(EVENTS_PREFIX):
        if after_key is not None and key <= after_key:
            continue
        report.scanned += 1
        if only.may_hold(key):
            pending.append(key)
        if len(pending) >= BATCH:
            await _replay_batch(archive, index, pending, only, announce_to, report)
            pending = []
            if on_progress is not None:
                on_progress(report)
    if pending:
        await _replay_batch(archive, index, pending, only, announce_to, report)
    if on_progress is not None:
        on_progress(report)
    return report


async def _replay_batch(
    archive: ArchiveStore,
    index: MemoryIndex,
    keys: list[str],
    only: ReplayFilter,
    announce_to: EventBus | None,
    report: ReplayReport,
) -> None:
    bodies = await asyncio.gather(*(archive.get(key) for key in keys))
    docs: list[IndexDocument] = []
    for body in bodies:
        event = ArchivedEvent.model_validate_json(body)
        if only.admits(event):
            docs.append(
                index_document_for(
                    event,
                    embedding=list(event.input.embedding),
                    importance_score=event.importance_score,
                    object_storage_key=event.object_storage_key,
                )
            )
    if docs:
        await index.ensure(dimension=len(docs[0].embedding))
        await index.upsert(docs)
    if announce_to is not None:
        await asyncio.gather(
            *(
                announce_to.publish(
                    MEMORY_INDEXED,
                    json.dumps(indexed_payload_for(doc).to_wire()).encode(),
                    key=doc.event_id.encode(),
                )
                for doc in docs
            )
        )
    report.indexed += len(docs)
    report.last_key = keys[-1]
    log.info("replay_batch_indexed", indexed=len(docs), last_key=report.last_key)
