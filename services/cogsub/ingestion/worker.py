"""The Stage 1 ingestion worker: experience.raw → archive + index → announcements.

A batch moves through the seed's stages in order and is committed last, so a
crash anywhere before the commit means the batch is delivered again. Every
effect is idempotent on redelivery: the archive refuses a second write (and
the worker then checks the stored object is the same experience), the index
upserts by event id, and announcements are at-least-once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import structlog

from cogsub.archive.ports import ArchiveStore
from cogsub.bus.ports import Consumer, EventBus, Record
from cogsub.core.documents import (
    EXPERIENCE_INDEX,
    IndexDocument,
    enriched_payload_for,
    index_document_for,
    indexed_payload_for,
)
from cogsub.core.errors import CogsubError, ConfigurationError, ObjectExistsError
from cogsub.core.events import ArchivedEvent
from cogsub.core.importance import score_importance
from cogsub.core.keys import object_key_for
from cogsub.core.topics import (
    EXPERIENCE_ENRICHED,
    EXPERIENCE_RAW,
    EXPERIENCE_RAW_DLQ,
    MEMORY_INDEXED,
    STAGE1_TOPICS,
)
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
T = TypeVar("T")

StageObserver = Callable[[Stage, Sequence[str]], None]
"""Called as each stage of a batch completes, with the event ids it covered."""


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff for retryable failures; the batch is retried until it succeeds."""

    initial_s: float = 0.1
    max_s: float = 5.0
    multiplier: float = 2.0

    def delay(self, attempt: int) -> float:
        base = min(self.max_s, self.initial_s * self.multiplier**attempt)
        return base * (0.5 + random.random() / 2)


@dataclass
class BatchOutcome:
    """What one batch did, for progress output and tests."""

    indexed: list[IndexDocument] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)


class IngestionWorker:
    """Consumes experience.raw and makes every event durable and discoverable."""

    def __init__(
        self,
        *,
        bus: EventBus,
        archive: ArchiveStore,
        index: MemoryIndex,
        embedder: Embedder,
        group: str = "ingestion",
        batch_size: int = 256,
        poll_timeout_s: float = 0.5,
        retry: RetryPolicy | None = None,
        observer: StageObserver | None = None,
        index_name: str = EXPERIENCE_INDEX,
        messaging_system: str = "sqlite",
    ) -> None:
        self._bus = bus
        self._archive = archive
        self._index = index
        self._embedder = embedder
        self._group = group
        self._batch_size = batch_size
        self._poll_timeout_s = poll_timeout_s
        self._retry = retry or RetryPolicy()
        self._observer = observer
        self._index_name = index_name
        self._messaging_system = messaging_system

    async def prepare(self) -> None:
        """Create topics and the index if missing (idempotent)."""
        await self._bus.ensure_topics(STAGE1_TOPICS)
        await self._index.ensure(dimension=self._embedder.dimension)

    async def run(
        self,
        stop: asyncio.Event,
        *,
        on_batch: Callable[[BatchOutcome], None] | None = None,
    ) -> None:
        """Consume until ``stop`` is set; the batch in hand is finished and committed first.

        The next batch is polled and embedded while the current one is stored, so
        the embedder never waits for archive and index I/O. Embedding has no
        effects, so a batch abandoned at shutdown is simply delivered again.
        """
        consumer = self._bus.consumer([EXPERIENCE_RAW], group=self._group)
        ahead: tuple[list[Record], asyncio.Task[dict[str, list[float]]]] | None = None
        try:
            while not stop.is_set():
                if ahead is None:
                    ahead = await self._poll_ahead(consumer)
                    continue
                records, vectors = ahead
                ahead = await self._poll_ahead(consumer)
                outcome = await self.process(records, consumer, vectors=await vectors)
                if on_batch is not None:
                    on_batch(outcome)
        finally:
            if ahead is not None:
                ahead[1].cancel()
                with contextlib.suppress(BaseException):
                    await ahead[1]
            await consumer.close()

    async def _poll_ahead(
        self, consumer: Consumer
    ) -> tuple[list[Record], asyncio.Task[dict[str, list[float]]]] | None:
        records = await consumer.poll(max_records=self._batch_size, timeout_s=self._poll_timeout_s)
        if not records:
            return None
        return records, asyncio.create_task(self._embed_texts(records))

    async def _embed_texts(self, records: Sequence[Record]) -> dict[str, list[float]]:
        """Vectors by text for the records' events; failures leave it to the batch itself."""
        texts: list[str] = []
        for record in records:
            item = receive(record, dimension=self._embedder.dimension)
            if isinstance(item, Accepted) and not item.event.input.embedding:
                texts.append(item.event.input.text)
        unique = list(dict.fromkeys(texts))
        try:
            vectors = await self._embedder.embed(unique) if unique else []
        except Exception:  # the batch embeds again, with its own retries and isolation
            return {}
        return dict(zip(unique, vectors, strict=True))

    async def process(
        self,
        records: Sequence[Record],
        consumer: Consumer,
        *,
        vectors: Mapping[str, list[float]] | None = None,
    ) -> BatchOutcome:
        """Run one batch to its commit; a record that cannot be processed is dead-lettered.

        ``vectors`` are embeddings already computed for some texts (by text).
        """
        outcome = await self._process_isolating(records, vectors or {})
        await consumer.commit(records)
        self._observe(Stage.COMMIT, [d.event_id for d in outcome.indexed])
        return outcome

    async def _process_isolating(
        self, records: Sequence[Record], vectors: Mapping[str, list[float]]
    ) -> BatchOutcome:
        """Process the batch; if it fails for good, find the culprit record by record."""
        try:
            return await self._retrying(lambda: self._process_once(records, vectors))
        except ConfigurationError:
            raise  # wrong settings fail every record alike: stop loudly, dead-letter nothing
        except Exception as exc:  # a poison record must never stop the partition
            if len(records) > 1:
                log.warning("ingestion_batch_split", error=str(exc), size=len(records))
                outcome = BatchOutcome()
                for record in records:
                    single = await self._process_isolating([record], vectors)
                    outcome.indexed += single.indexed
                    outcome.rejected += single.rejected
                return outcome
            log.exception("ingestion_record_failed", offset=records[0].offset)
            rejection = Rejection(records[0], RejectionKind.FAILED, f"{type(exc).__name__}: {exc}")
            spans = self._batch_trace()
            try:
                await self._retrying(lambda: self._announce([], [rejection], spans))
            finally:
                spans.end()
            return BatchOutcome(rejected=[rejection])

    async def _retrying(self, step: Callable[[], Awaitable[T]]) -> T:
        """Run ``step`` until it succeeds or fails with a non-retryable error."""
        attempt = 0
        while True:
            try:
                return await step()
            except CogsubError as exc:
                if not exc.retryable:
                    raise
                delay = self._retry.delay(attempt)
                log.warning("ingestion_step_retry", error=str(exc), attempt=attempt, delay_s=delay)
                attempt += 1
                await asyncio.sleep(delay)

    async def _process_once(
        self, records: Sequence[Record], vectors: Mapping[str, list[float]]
    ) -> BatchOutcome:
        outcome = BatchOutcome()
        accepted: list[Accepted] = []
        spans = self._batch_trace()
        try:
            for record in records:
                item = receive(record, dimension=self._embedder.dimension)
                if isinstance(item, Accepted):
                    accepted.append(item)
                    spans.begin(item.record, item.event)
                else:
                    outcome.rejected.append(item)
            self._observe(Stage.RECEIVE, [a.event.event_id for a in accepted])
            firsts, repeats = first_of_each_id(accepted)
            ids = [a.event.event_id for a in firsts]
            with spans.stage("experience.embed", ids):
                embeddings = await self._embed(firsts, vectors)
            archived = self._derive(firsts, embeddings)
            with spans.stage("experience.archive.put", ids):
                stored = await self._archive_all(firsts, archived, outcome)
            docs = [_document(a) for a in stored]
            with spans.stage("experience.index.write", [d.event_id for d in docs]):
                if docs:
                    await self._index.upsert(docs)
            self._observe(Stage.INDEX, [d.event_id for d in docs])
            await self._announce(docs, outcome.rejected, spans)
        finally:
            spans.end()
        outcome.indexed = docs
        if repeats:
            # A repeat of an id in the same batch meets the archive like any redelivery.
            again = await self._process_once([r.record for r in repeats], vectors)
            outcome.indexed += again.indexed
            outcome.rejected += again.rejected
        return outcome

    def _batch_trace(self) -> BatchTrace:
        return BatchTrace(group=self._group, messaging_system=self._messaging_system)

    async def _embed(
        self, items: Sequence[Accepted], ready: Mapping[str, list[float]]
    ) -> dict[str, list[float]]:
        """Vectors by event id: computed ahead, or one batched call for the rest."""
        missing = [a.event for a in items if not a.event.input.embedding]
        todo = [e for e in missing if e.input.text not in ready]
        computed = await self._embedder.embed([e.input.text for e in todo]) if todo else []
        by_text = {**ready, **{e.input.text: v for e, v in zip(todo, computed, strict=True)}}
        self._observe(Stage.EMBED, [a.event.event_id for a in items])
        return {e.event_id: by_text[e.input.text] for e in missing}

    def _derive(
        self, items: Sequence[Accepted], vectors: dict[str, list[float]]
    ) -> list[ArchivedEvent]:
        """Score and key every event, and shape what the archive keeps."""
        events = [a.event for a in items]
        ids = [e.event_id for e in events]
        scores = [score_importance(e) for e in events]
        self._observe(Stage.SCORE, ids)
        keys = [object_key_for(e) for e in events]
        self._observe(Stage.KEY, ids)
        return [
            archived_event_for(
                e,
                embedding=vectors.get(e.event_id, list(e.input.embedding)),
                importance_score=score,
                key=key,
            )
            for e, score, key in zip(events, scores, keys, strict=True)
        ]

    async def _archive_all(
        self, items: Sequence[Accepted], archived: Sequence[ArchivedEvent], outcome: BatchOutcome
    ) -> list[ArchivedEvent]:
        results = await asyncio.gather(*(self._archive_one(a) for a in archived))
        stored: list[ArchivedEvent] = []
        for item, result in zip(items, results, strict=True):
            if isinstance(result, ArchivedEvent) and same_experience(item.event, result):
                stored.append(result)
            elif isinstance(result, ArchivedEvent):
                outcome.rejected.append(_conflict(item, result.object_storage_key))
        self._observe(Stage.ARCHIVE, [a.event_id for a in stored])
        return stored

    async def _archive_one(self, archived: ArchivedEvent) -> ArchivedEvent:
        """Write once; on redelivery, the stored object is the truth to index from."""
        key = archived.object_storage_key
        try:
            await self._archive.put_once(key, archive_body(archived))
            return archived
        except ObjectExistsError:
            return ArchivedEvent.model_validate_json(await self._archive.get(key))

    async def _announce(
        self, docs: Sequence[IndexDocument], rejected: Sequence[Rejection], spans: BatchTrace
    ) -> None:
        publishes = []
        for doc in docs:
            spans.indexed(doc, index_name=self._index_name, model=self._embedder.name)
            key = doc.event_id.encode()
            headers = headers_with_context((), spans.context_for(doc.event_id))
            enriched = enriched_payload_for(doc).to_wire()
            indexed = indexed_payload_for(doc, index=self._index_name).to_wire()
            publishes += [
                self._bus.publish(EXPERIENCE_ENRICHED, _json(enriched), key=key, headers=headers),
                self._bus.publish(MEMORY_INDEXED, _json(indexed), key=key, headers=headers),
            ]
        for rejection in rejected:
            record = rejection.record
            context = spans.rejected(record, rejection.kind.value, rejection.reason)
            headers = headers_with_context(dlq_headers(rejection), context)
            publishes.append(
                self._bus.publish(EXPERIENCE_RAW_DLQ, record.value, key=record.key, headers=headers)
            )
            log.warning(
                "event_dead_lettered",
                kind=rejection.kind.value,
                reason=rejection.reason,
                partition=record.partition,
                offset=record.offset,
            )
        with spans.stage("experience.publish", [d.event_id for d in docs]):
            await asyncio.gather(*publishes)
        self._observe(Stage.EMIT, [d.event_id for d in docs])

    def _observe(self, stage: Stage, event_ids: Sequence[str]) -> None:
        if self._observer is not None:
            self._observer(stage, event_ids)


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


def _json(payload: dict[str, object]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()
