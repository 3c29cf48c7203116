"""The stages one batch goes through, split where the worker pipelines them.

``stage`` runs receive → embed → score → key → archive; ``finish`` runs index →
emit. The worker may stage batch N+1 while batch N finishes, and commits in
order, so the slowest store sets the pace instead of the sum of all of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import structlog

from cogsub.archive.ports import ArchiveStore
from cogsub.bulk import Outgoing, publish_all, put_all
from cogsub.bus.ports import EventBus, Record
from cogsub.core.documents import (
    IndexDocument,
    enriched_payload_json,
    index_document_for,
    indexed_payload_json,
)
from cogsub.core.errors import ObjectExistsError
from cogsub.core.events import ArchivedEvent
from cogsub.core.importance import score_importance
from cogsub.core.keys import object_key_for
from cogsub.core.topics import EXPERIENCE_ENRICHED, EXPERIENCE_RAW_DLQ, MEMORY_INDEXED
from cogsub.embeddings.ports import Embedder
from cogsub.index.ports import MemoryIndex
from cogsub.ingestion.pipeline import (
    Accepted,
    Rejection,
    RejectionKind,
    Stage,
    archive_body,
    archived_event_for,
    dlq_headers,
    first_of_each_id,
    receive,
    same_experience,
)
from cogsub.ingestion.tracing import BatchTrace
from cogsub.telemetry.tracing import headers_with_context

log = structlog.get_logger("cogsub.ingestion")

StageObserver = Callable[[Stage, Sequence[str]], None]
"""Called as each stage of a batch completes, with the event ids it covered."""


@dataclass
class BatchOutcome:
    """What one batch did, for progress output and tests."""

    indexed: list[IndexDocument] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)


@dataclass
class StagedBatch:
    """A batch whose events are archived; ``spans`` stay open until the caller ends them."""

    records: Sequence[Record]
    stored: list[ArchivedEvent]
    outcome: BatchOutcome
    spans: BatchTrace


@dataclass(frozen=True)
class BatchSteps:
    """The ports and names every stage needs."""

    bus: EventBus
    archive: ArchiveStore
    index: MemoryIndex
    embedder: Embedder
    group: str
    index_name: str
    messaging_system: str
    observer: StageObserver | None = None

    def receive_all(self, records: Sequence[Record]) -> list[Accepted | Rejection]:
        """Parse and validate every record (pure; safe to run ahead of the batch)."""
        return [receive(record, dimension=self.embedder.dimension) for record in records]

    async def stage(
        self,
        records: Sequence[Record],
        vectors: Mapping[str, list[float]],
        received: Sequence[Accepted | Rejection] | None = None,
    ) -> StagedBatch:
        """Validate, embed, score, key and archive; nothing is announced yet.

        ``received`` is ``receive_all(records)`` when the caller already ran it.
        """
        spans = BatchTrace(group=self.group, messaging_system=self.messaging_system)
        outcome = BatchOutcome()
        try:
            accepted: list[Accepted] = []
            for item in received if received is not None else self.receive_all(records):
                if isinstance(item, Accepted):
                    accepted.append(item)
                    spans.begin(item.record, item.event)
                else:
                    outcome.rejected.append(item)
            self.observe(Stage.RECEIVE, [a.event.event_id for a in accepted])
            firsts, repeats = first_of_each_id(accepted)
            ids = [a.event.event_id for a in firsts]
            with spans.stage("experience.embed", ids):
                embeddings = await self._embed(firsts, vectors)
            archived = self._derive(firsts, embeddings)
            with spans.stage("experience.archive.put", ids):
                stored = await self._archive_all(firsts, archived, outcome)
                # A repeat of an id in the same batch meets the archive like any redelivery.
                repeated = self._derive(repeats, embeddings | await self._embed(repeats, vectors))
                await self._archive_all(repeats, repeated, outcome)
            self.observe(Stage.ARCHIVE, [a.event_id for a in stored])
        except BaseException:
            spans.end()
            raise
        return StagedBatch(records=records, stored=stored, outcome=outcome, spans=spans)

    async def finish(self, staged: StagedBatch) -> BatchOutcome:
        """Index the archived events and announce them (and the dead letters)."""
        docs = [_document(a) for a in staged.stored]
        with staged.spans.stage("experience.index.write", [d.event_id for d in docs]):
            if docs:
                await self.index.upsert(docs)
        self.observe(Stage.INDEX, [d.event_id for d in docs])
        await self.announce(docs, staged.outcome.rejected, staged.spans)
        return BatchOutcome(indexed=docs, rejected=list(staged.outcome.rejected))

    async def _embed(
        self, items: Sequence[Accepted], ready: Mapping[str, list[float]]
    ) -> dict[tuple[str, str], list[float]]:
        """Vectors by (bank, event id): computed ahead, or one batched call for the rest."""
        missing = [a.event for a in items if not a.event.input.embedding]
        todo = list(dict.fromkeys(e.input.text for e in missing if e.input.text not in ready))
        computed = await self.embedder.embed(todo) if todo else []
        by_text = {**ready, **dict(zip(todo, computed, strict=True))}
        if items:
            self.observe(Stage.EMBED, [a.event.event_id for a in items])
        return {(e.bank_id, e.event_id): by_text[e.input.text] for e in missing}

    def _derive(
        self, items: Sequence[Accepted], vectors: Mapping[tuple[str, str], list[float]]
    ) -> list[ArchivedEvent]:
        """Score and key every event, and shape what the archive keeps."""
        events = [a.event for a in items]
        ids = [e.event_id for e in events]
        scores = [score_importance(e) for e in events]
        keys = [object_key_for(e) for e in events]
        if items:
            self.observe(Stage.SCORE, ids)
            self.observe(Stage.KEY, ids)
        return [
            archived_event_for(
                e,
                embedding=vectors.get((e.bank_id, e.event_id), list(e.input.embedding)),
                importance_score=score,
                key=key,
            )
            for e, score, key in zip(events, scores, keys, strict=True)
        ]

    async def _archive_all(
        self, items: Sequence[Accepted], archived: Sequence[ArchivedEvent], outcome: BatchOutcome
    ) -> list[ArchivedEvent]:
        """Write each event once; on redelivery the stored object is the truth to index from."""
        results = await put_all(
            self.archive, [(a.object_storage_key, archive_body(a)) for a in archived]
        )
        taken: list[int] = []
        for at, result in enumerate(results):
            if isinstance(result, ObjectExistsError):
                taken.append(at)
            elif result is not None:
                raise result
        bodies = await asyncio.gather(
            *(self.archive.get(archived[at].object_storage_key) for at in taken)
        )
        existing = {
            at: ArchivedEvent.model_validate_json(body)
            for at, body in zip(taken, bodies, strict=True)
        }
        stored: list[ArchivedEvent] = []
        for at, (item, fresh) in enumerate(zip(items, archived, strict=True)):
            found = existing.get(at)
            if found is None:  # written just now from this very event: nothing to compare
                stored.append(fresh)
            elif same_experience(item.event, found):
                stored.append(found)
            else:
                outcome.rejected.append(_conflict(item, found.object_storage_key))
        return stored

    async def announce(
        self, docs: Sequence[IndexDocument], rejected: Sequence[Rejection], spans: BatchTrace
    ) -> None:
        """Publish experience.enriched and memory.indexed per doc, and every dead letter.

        The whole batch's records go out in one bus call where the bus offers one.
        """
        records: list[Outgoing] = []
        for doc in docs:
            spans.indexed(doc, index_name=self.index_name, model=self.embedder.name)
            key = doc.event_id.encode()
            headers = headers_with_context((), spans.context_for(doc.event_id))
            enriched = enriched_payload_json(doc)
            indexed = indexed_payload_json(doc, index=self.index_name)
            records += [
                (EXPERIENCE_ENRICHED, enriched, key, headers),
                (MEMORY_INDEXED, indexed, key, headers),
            ]
        for rejection in rejected:
            record = rejection.record
            context = spans.rejected(record, rejection.kind.value, rejection.reason)
            headers = headers_with_context(dlq_headers(rejection), context)
            records.append((EXPERIENCE_RAW_DLQ, record.value, record.key, headers))
            log.warning(
                "event_dead_lettered",
                kind=rejection.kind.value,
                reason=rejection.reason,
                partition=record.partition,
                offset=record.offset,
            )
        with spans.stage("experience.publish", [d.event_id for d in docs]):
            await publish_all(self.bus, records)
        self.observe(Stage.EMIT, [d.event_id for d in docs])

    def observe(self, stage: Stage, event_ids: Sequence[str]) -> None:
        if self.observer is not None:
            self.observer(stage, event_ids)


def _document(archived: ArchivedEvent) -> IndexDocument:
    return index_document_for(
        archived,
        embedding=list(archived.input.embedding),
        importance_score=archived.importance_score,
        object_storage_key=archived.object_storage_key,
    )


def _conflict(item: Accepted, key: str) -> Rejection:
    reason = (
        f"eventId: {item.event.event_id!r} is already archived at {key} with different "
        "content; an archived event is never overwritten"
    )
    return Rejection(item.record, RejectionKind.CONFLICT, reason)
