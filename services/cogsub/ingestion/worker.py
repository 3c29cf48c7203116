"""The Stage 1 ingestion worker: experience.raw → archive + index → announcements.

A batch moves through the seed's stages in order and is committed last, so a
crash anywhere before the commit means the batch is delivered again. Every
effect is idempotent on redelivery: the archive refuses a second write (and
the worker then checks the stored object is the same experience), the index
upserts by event id, and announcements are at-least-once.

``run`` pipelines batches: the next batch is polled and embedded while one is
archived and up to ``finishing_depth`` archived batches are indexed, announced
and committed. An index write that waits for the index's refresh is mostly
waiting, so more than one of them in flight keeps the archive busy. Commits
stay in order, and nothing before the commit has effects another batch
depends on.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import structlog

from cogsub.archive.ports import ArchiveStore
from cogsub.bus.ports import Consumer, EventBus, Record
from cogsub.core.documents import EXPERIENCE_INDEX
from cogsub.core.errors import CogsubError, ConfigurationError
from cogsub.core.topics import EXPERIENCE_RAW, STAGE1_TOPICS
from cogsub.embeddings.ports import Embedder
from cogsub.index.ports import MemoryIndex
from cogsub.ingestion.batch import BatchOutcome, BatchSteps, StagedBatch, StageObserver
from cogsub.ingestion.pipeline import Accepted, Rejection, RejectionKind, Stage
from cogsub.ingestion.tracing import BatchTrace

log = structlog.get_logger("cogsub.ingestion")
T = TypeVar("T")


@dataclass(frozen=True)
class _Prepared:
    """A polled batch parsed and embedded ahead of its turn (no effects yet)."""

    received: list[Accepted | Rejection]
    vectors: dict[str, list[float]]


_Ahead = tuple[list[Record], "asyncio.Task[_Prepared]"]


async def _abandoned_poll(polling: asyncio.Task[_Ahead | None]) -> _Ahead | None:
    """What a poll left running at shutdown got, if it got anything (it is cancelled if not)."""
    polling.cancel()
    try:
        return await polling
    except BaseException:  # cancelled, or the poll itself failed: nothing to clean up
        return None


class _Stopping(BaseException):
    """Raised between retries once the worker is asked to stop: the batch is left uncommitted.

    A BaseException, so that the poison-isolation paths (which catch Exception) never
    mistake a shutdown for a bad record.
    """


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff for retryable failures; the batch is retried until it succeeds."""

    initial_s: float = 0.1
    max_s: float = 5.0
    multiplier: float = 2.0

    def delay(self, attempt: int) -> float:
        base = min(self.max_s, self.initial_s * self.multiplier**attempt)
        return base * (0.5 + random.random() / 2)


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
    ) -> None:
        if finishing_depth < 1:
            raise ConfigurationError("finishing_depth must be at least 1")
        self._finishing_depth = finishing_depth
        self._bus = bus
        self._index = index
        self._embedder = embedder
        self._group = group
        self._batch_size = batch_size
        self._poll_timeout_s = poll_timeout_s
        self._retry = retry or RetryPolicy()
        self._stop: asyncio.Event | None = None
        self._steps = BatchSteps(
            bus=bus,
            archive=archive,
            index=index,
            embedder=embedder,
            group=group,
            index_name=index_name,
            messaging_system=messaging_system,
            observer=observer,
        )

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
        report = on_batch or (lambda _: None)
        self._stop = stop
        consumer = self._bus.consumer([EXPERIENCE_RAW], group=self._group)
        ahead: _Ahead | None = None
        polling: asyncio.Task[_Ahead | None] | None = None
        # Oldest first; each commits only after the one before it has committed.
        finishing: deque[asyncio.Task[BatchOutcome]] = deque()
        try:
            while not stop.is_set():
                if ahead is None:
                    while finishing:  # idle: let the last batches land before waiting
                        report(await finishing.popleft())
                    ahead = await self._poll_ahead(consumer)
                    continue
                records, preparing = ahead
                # The next poll runs while this batch is staged, off the archive's path.
                polling = asyncio.create_task(self._poll_ahead(consumer))
                prepared = await preparing
                vectors = prepared.vectors
                staged = await self._stage_or_none(records, prepared)
                ahead, polling = await polling, None
                while finishing and (staged is None or len(finishing) >= self._finishing_depth):
                    report(await finishing.popleft())
                if staged is None:  # something in it fails for good: find it record by record
                    report(await self.process(records, consumer, vectors=vectors))
                    continue
                after = finishing[-1] if finishing else None
                finishing.append(
                    asyncio.create_task(self._finish_and_commit(staged, consumer, after))
                )
            while finishing:
                report(await finishing.popleft())
        except _Stopping:
            log.warning("ingestion_stopped_while_retrying")  # uncommitted: delivered again
        finally:
            polled = None
            if polling is not None:  # records polled but never staged are delivered again
                polled = await _abandoned_poll(polling)
            leftover = [*finishing, ahead[1] if ahead else None, polled[1] if polled else None]
            for task in leftover:
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
                elif task is not None and not task.cancelled():
                    task.exception()  # a batch failed behind the one that stopped us: seen
            await consumer.close()

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
        await self._commit(records, consumer, outcome)
        return outcome

    async def _commit(
        self, records: Sequence[Record], consumer: Consumer, outcome: BatchOutcome
    ) -> None:
        try:
            await consumer.commit(records)
        except CogsubError as exc:
            if not exc.retryable:
                raise
            # A rebalance took the partition away: its effects are durable and idempotent,
            # the next owner re-reads from the last commit, and a later commit covers it.
            # Retrying in place would race the consumer's rejoin.
            log.warning("ingestion_commit_failed", error=str(exc), size=len(records))
            return
        self._steps.observe(Stage.COMMIT, [d.event_id for d in outcome.indexed])

    async def _stage_or_none(
        self, records: Sequence[Record], prepared: _Prepared
    ) -> StagedBatch | None:
        try:
            return await self._retrying(
                lambda: self._steps.stage(records, prepared.vectors, prepared.received)
            )
        except ConfigurationError:
            raise
        except Exception as exc:  # handled by the record-by-record path
            log.warning("ingestion_batch_split", error=str(exc), size=len(records))
            return None

    async def _finish_and_commit(
        self,
        staged: StagedBatch,
        consumer: Consumer,
        after: asyncio.Task[BatchOutcome] | None,
    ) -> BatchOutcome:
        """Index and announce ``staged``, then commit it once ``after`` has committed.

        Commits are cumulative per partition, so committing this batch before the
        one ahead of it would mark that one's records done before their effects.
        """
        try:
            outcome = await self._retrying(lambda: self._steps.finish(staged))
        except ConfigurationError:
            raise
        except Exception as exc:
            log.warning("ingestion_batch_split", error=str(exc), size=len(staged.records))
            outcome = await self._process_isolating(staged.records, {})
        finally:
            staged.spans.end()
        if after is not None:
            await asyncio.shield(after)  # its failure is ours too: nothing after it commits
        await self._commit(staged.records, consumer, outcome)
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
            spans = BatchTrace(group=self._group, messaging_system=self._steps.messaging_system)
            try:
                await self._retrying(lambda: self._steps.announce([], [rejection], spans))
            finally:
                spans.end()
            return BatchOutcome(rejected=[rejection])

    async def _process_once(
        self, records: Sequence[Record], vectors: Mapping[str, list[float]]
    ) -> BatchOutcome:
        staged = await self._steps.stage(records, vectors)
        try:
            return await self._steps.finish(staged)
        finally:
            staged.spans.end()

    async def _retrying(self, step: Callable[[], Awaitable[T]]) -> T:
        """Run ``step`` until it succeeds or fails with a non-retryable error."""
        attempt = 0
        while True:
            try:
                return await step()
            except CogsubError as exc:
                if not exc.retryable:
                    raise
                if self._stop is not None and self._stop.is_set():
                    raise _Stopping from exc
                delay = self._retry.delay(attempt)
                log.warning("ingestion_step_retry", error=str(exc), attempt=attempt, delay_s=delay)
                attempt += 1
                await asyncio.sleep(delay)

    async def _poll_ahead(self, consumer: Consumer) -> _Ahead | None:
        records = await self._retrying(
            lambda: consumer.poll(max_records=self._batch_size, timeout_s=self._poll_timeout_s)
        )
        if not records:
            return None
        return records, asyncio.create_task(self._prepare(records))

    async def _prepare(self, records: Sequence[Record]) -> _Prepared:
        """Parse the records and embed their texts; failures leave it to the batch itself."""
        received = self._steps.receive_all(records)
        texts = [
            item.event.input.text
            for item in received
            if isinstance(item, Accepted) and not item.event.input.embedding
        ]
        unique = list(dict.fromkeys(texts))
        try:
            vectors = await self._embedder.embed(unique) if unique else []
            return _Prepared(received, dict(zip(unique, vectors, strict=True)))
        except Exception:  # the batch embeds again, with its own retries and isolation
            return _Prepared(received, {})
