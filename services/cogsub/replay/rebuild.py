"""Re-derive the index from the archive alone: the truth layer made usable for replay.

Archived events already carry their embedding, importance score and key, so
rebuilding is reading, shaping and bulk upserting; nothing is embedded again.
Upserts are idempotent by event id, so a replay can be repeated or resumed
after an interruption from the last key it reported done (keys are listed in
lexicographic order: the derived memories under ``consolidation/`` first, then
the events by day).

What consolidation derived is rebuilt too: its memories from their objects,
then — always over the whole archive, whatever the resume point — the
provenance the index keeps as tags: supersession (``superseded-by:``,
``valid-to:``, ``supersedes:``) from the write-once supersession records, the
proof counts of merged facts from their evidence objects, and the supersession
of an observation another live one contains, by the rule a round applies (an
observation a killed round archived but never indexed has no record). Usage signals
(``retrieval_count``, ``decay_factor``) live only in the index and start over.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime

import structlog

from cogsub.archive.ports import ArchiveStore
from cogsub.bus.ports import EventBus
from cogsub.consolidation.containment import contained_observations
from cogsub.core.derived import (
    CONSOLIDATION_PREFIX,
    PROOF_TAG,
    SUPERSEDED_BY_TAG,
    SUPERSEDES_TAG,
    VALID_TO_TAG,
    DerivedKind,
    is_derived_memory_key,
    is_superseded,
    with_tags,
)
from cogsub.core.documents import IndexDocument, index_document_for, indexed_payload_for
from cogsub.core.events import ArchivedEvent, format_timestamp
from cogsub.core.keys import EVENTS_PREFIX
from cogsub.core.topics import MEMORY_INDEXED
from cogsub.embeddings.ports import Embedder
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

    def may_hold_derived(self, key: str) -> bool:
        """Derived memories name their bank in the key; their day is read from the object."""
        bank = key.removeprefix(CONSOLIDATION_PREFIX).split("/", 1)[0]
        return self.bank_id is None or bank == self.bank_id

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
    provenance: int = 0


async def replay(
    archive: ArchiveStore,
    index: MemoryIndex,
    *,
    only: ReplayFilter | None = None,
    after_key: str | None = None,
    announce_to: EventBus | None = None,
    on_progress: Callable[[ReplayReport], None] | None = None,
    reembed: Embedder | None = None,
) -> ReplayReport:
    """Index every admitted archived memory (keys after ``after_key``), in bulk.

    With ``reembed``, every text is embedded again by that embedder (batched) instead
    of reusing the archived vector: the way to a new index version for a new model.
    """
    only = only or ReplayFilter()
    report = ReplayReport()
    async for keys in archived_batches(archive, only, after_key, report):
        await _replay_batch(archive, index, keys, only, announce_to, report, reembed)
        if on_progress is not None:
            on_progress(report)
    report.provenance = await restore_provenance(archive, index, bank_id=only.bank_id)
    if on_progress is not None:
        on_progress(report)
    return report


async def archived_batches(
    archive: ArchiveStore, only: ReplayFilter, after_key: str | None, report: ReplayReport
) -> AsyncIterator[list[str]]:
    """The keys of archived memories ``only`` may admit, after ``after_key``, ``BATCH`` at a
    time: consolidation's derived memories first, then the events by day (``report.scanned``
    counts every memory key looked at)."""
    pending: list[str] = []
    for prefix, may_hold in (
        (CONSOLIDATION_PREFIX, only.may_hold_derived),
        (EVENTS_PREFIX, only.may_hold),
    ):
        async for key in archive.list(prefix):
            if after_key is not None and key <= after_key:
                continue
            if prefix == CONSOLIDATION_PREFIX and not is_derived_memory_key(key):
                continue
            report.scanned += 1
            if may_hold(key):
                pending.append(key)
            if len(pending) >= BATCH:
                yield pending
                pending = []
    if pending:
        yield pending


async def restore_provenance(
    archive: ArchiveStore, index: MemoryIndex, *, bank_id: str | None = None
) -> int:
    """Re-tag supersession and proof counts from the archive; returns the documents changed."""
    changed = 0
    prefix = f"{CONSOLIDATION_PREFIX}{bank_id}/" if bank_id else CONSOLIDATION_PREFIX
    proofs: dict[tuple[str, str], int] = {}
    observations: list[str] = []
    async for key in archive.list(prefix):
        parts = key.removeprefix(CONSOLIDATION_PREFIX).split("/")
        if len(parts) == 4 and parts[1] == "evidence":
            proofs[(parts[0], parts[2])] = proofs.get((parts[0], parts[2]), 0) + 1
        elif len(parts) == 3 and parts[1] == "supersessions":
            record = json.loads(await archive.get(key))
            changed += await _retag(
                index,
                parts[0],
                str(record["supersededBy"]),
                [f"{SUPERSEDES_TAG}{record['memoryId']}"],
            )
            changed += await _retag(
                index,
                parts[0],
                str(record["memoryId"]),
                [
                    f"{SUPERSEDED_BY_TAG}{record['supersededBy']}",
                    f"{VALID_TO_TAG}{record['validTo']}",
                ],
            )
        elif len(parts) == 3 and parts[1] == f"{DerivedKind.OBSERVATION.value}s":
            observations.append(key)
    for (bank, fact_id), count in sorted(proofs.items()):
        changed += await _retag(index, bank, fact_id, [f"{PROOF_TAG}{count}"], replace=(PROOF_TAG,))
    return changed + await supersede_contained(archive, index, observations)


async def supersede_contained(archive: ArchiveStore, index: MemoryIndex, keys: list[str]) -> int:
    """Retire each live observation of ``keys`` another live one contains, as a round would.

    A round killed after archiving an observation and before indexing it leaves an
    object no round completes once the cluster has grown (its id changes), and no
    supersession record names it; indexed as it is, it would be live beside its
    successor. Applying the round's own rule (``contained_observations``) here,
    after the records are restored, makes the rebuilt live observations the running
    index's. The rule is derived again on every replay rather than written to the
    archive: replay only reads the truth. Returns the documents changed.
    """
    live: dict[str, dict[str, frozenset[str]]] = {}  # bank -> observation -> sources
    ends: dict[tuple[str, str], datetime] = {}  # (bank, observation) -> its timestamp
    for start in range(0, len(keys), BATCH):
        bodies = await archive.get_many(keys[start : start + BATCH])
        for body in bodies.values():
            event = ArchivedEvent.model_validate_json(body)
            doc = await index.get(event.bank_id, event.event_id)
            if doc is None or is_superseded(doc):
                continue
            live.setdefault(event.bank_id, {})[event.event_id] = _sources(event)
            ends[(event.bank_id, event.event_id)] = event.timestamp
    changed = 0
    for bank, current in sorted(live.items()):
        for found in contained_observations(current, current):
            valid_to = format_timestamp(ends[(bank, found.winner)])
            changed += await _retag(index, bank, found.winner, [f"{SUPERSEDES_TAG}{found.loser}"])
            loser_tags = [f"{SUPERSEDED_BY_TAG}{found.winner}", f"{VALID_TO_TAG}{valid_to}"]
            changed += await _retag(index, bank, found.loser, loser_tags)
            log.info(
                "replay_observation_superseded",
                bank_id=bank,
                memory_id=found.loser,
                superseded_by=found.winner,
                rule=found.rule,
            )
    return changed


def _sources(event: ArchivedEvent) -> frozenset[str]:
    structured = event.input.structured
    sources = structured.get("sources") if isinstance(structured, dict) else None
    return frozenset(str(s) for s in sources) if isinstance(sources, list) else frozenset()


async def _retag(
    index: MemoryIndex,
    bank_id: str,
    memory_id: str,
    tags: list[str],
    *,
    replace: tuple[str, ...] = (),
) -> int:
    doc = await index.get(bank_id, memory_id)
    if doc is None:
        return 0
    updated = with_tags(doc, tags, replace=replace)
    if updated.tags == doc.tags:
        return 0
    await index.upsert([updated])
    return 1


async def _replay_batch(
    archive: ArchiveStore,
    index: MemoryIndex,
    keys: list[str],
    only: ReplayFilter,
    announce_to: EventBus | None,
    report: ReplayReport,
    reembed: Embedder | None,
) -> None:
    bodies = await asyncio.gather(*(archive.get(key) for key in keys))
    events = [ArchivedEvent.model_validate_json(body) for body in bodies]
    events = [event for event in events if only.admits(event)]
    if reembed is not None:
        vectors = await reembed.embed([event.input.text for event in events])
    else:
        vectors = [list(event.input.embedding) for event in events]
    docs: list[IndexDocument] = [
        index_document_for(
            event,
            embedding=vector,
            importance_score=event.importance_score,
            object_storage_key=event.object_storage_key,
        )
        for event, vector in zip(events, vectors, strict=True)
    ]
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
