"""The Stage 1 ingestion worker: experience.raw → archive + index → announcements.

A batch moves through the seed's stages in order and is committed last, so a
crash anywhere before the commit means the batch is delivered again. Every
effect is idempotent on redelivery: the archive refuses a second write (and
the worker then checks the stored object is the same experience), the index
upserts by event id, and announcements are at-least-once.

The worker is a handler on the consumer runtime (``cogsub.bus.subscriber``),
which pipelines batches: the next batch is polled while one is embedded and
archived, and up to ``finishing_depth`` archived batches are indexed, announced
and committed. An index write that waits for the index's refresh is mostly
waiting, so more than one of them in flight keeps the archive busy. Commits
stay in order, and nothing before the commit has effects another batch
depends on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import structlog

from cogsub.archive.ports import ArchiveStore
from cogsub.bus.dead_letters import DeadLetter
from cogsub.bus.middleware import LogContext, Middleware, TracedDeadLetters
from cogsub.bus.ports import Consumer, EventBus, Record
from cogsub.bus.retry import Backoff
from cogsub.bus.subscriber import AckPolicy, Subscriber, Subscription
from cogsub.core.documents import EXPERIENCE_INDEX
from cogsub.core.topics import EXPERIENCE_RAW, EXPERIENCE_RAW_DLQ, STAGE1_TOPICS
from cogsub.embeddings.ports import Embedder
from cogsub.index.ports import MemoryIndex
from cogsub.ingestion.batch import BatchOutcome, BatchSteps, StagedBatch, StageObserver
from cogsub.ingestion.pipeline import Rejection, RejectionKind, Stage
from cogsub.ingestion.tracing import IngestionSpans, SpanNames

log = structlog.get_logger("cogsub.ingestion")

RetryPolicy = Backoff
"""Backoff for retryable failures; the batch is retried until it succeeds or is stopped."""


class IngestionBatches:
    """Stage 1 as a handler: ``stage`` embeds and archives; ``finish`` dead-letters, indexes
    and announces."""

    def __init__(self, steps: BatchSteps) -> None:
        self._steps = steps

    async def stage(self, records: Sequence[Record]) -> StagedBatch:
        return await self._steps.stage(records, {})

    async def finish(self, staged: StagedBatch) -> BatchOutcome:
        return await self._steps.finish(staged)

    def merged(self, parts: Sequence[BatchOutcome | DeadLetter]) -> BatchOutcome:
        outcome = BatchOutcome()
        for part in parts:
            if isinstance(part, DeadLetter):
                outcome.rejected.append(Rejection(part.record, RejectionKind.FAILED, part.reason))
            else:
                outcome.indexed += part.indexed
                outcome.rejected += part.rejected
        return outcome

    def committed(self, outcome: BatchOutcome) -> None:
        self._steps.observe(Stage.COMMIT, [d.event_id for d in outcome.indexed])


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
        finishing_depth: int = 1,
        middlewares: Sequence[Middleware] = (),
    ) -> None:
        self._bus = bus
        self._index = index
        self._embedder = embedder
        steps = BatchSteps(
            bus=bus,
            archive=archive,
            index=index,
            embedder=embedder,
            index_name=index_name,
            send_letter=self._dead_letter,
            observer=observer,
        )
        subscription = Subscription(
            name="ingestion",
            topics=(EXPERIENCE_RAW,),
            group=group,
            batch_size=batch_size,
            poll_timeout_s=poll_timeout_s,
            finishing_depth=finishing_depth,
            backoff=retry or Backoff(),
        )
        # A poison record must never stop the partition: it is found and dead-lettered.
        acks = AckPolicy(dead_letter_topic=EXPERIENCE_RAW_DLQ)
        names = SpanNames(group, messaging_system, index_name, embedder.name)
        chain = [
            LogContext(),
            IngestionSpans(names),
            TracedDeadLetters("experience.ingest", group=group, messaging_system=messaging_system),
            *middlewares,
        ]
        self._subscriber = Subscriber(
            bus, subscription, IngestionBatches(steps), middlewares=chain, acks=acks
        )

    async def _dead_letter(self, letter: DeadLetter) -> None:
        """A letter ingestion decided on (``invalid``, ``conflict``), sent as the runtime's own."""
        await self._subscriber.dead_letter(letter)

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
        """Consume until ``stop`` is set; batches in hand are finished and committed first.

        Embedding and archiving have no effect another batch relies on, so a batch
        abandoned at shutdown after them is simply delivered again.
        """
        await self._subscriber.run(stop, on_batch=on_batch)

    async def process(self, records: Sequence[Record], consumer: Consumer) -> BatchOutcome:
        """Run one batch to its commit; a record that cannot be processed is dead-lettered."""
        return await self._subscriber.process(records, consumer)
