"""The consolidation worker: extraction on ``experience.enriched``, rounds on request and schedule.

One consumer group reads both topics. An enriched announcement is extracted
into facts; a ``consolidation.request`` (``{"bankId": ...}``) runs a round of
that bank; every ``schedule_s`` the banks that received facts since the last
scheduled round get one too, in a background task, so extraction does not
wait for them. A round asked for on demand first waits until every memory
acknowledged before the ask is ingested and extracted (:class:`Backlog`).
Offsets are committed after the effects; a commit a rebalance refuses is
left for the partition's next owner or a later commit. Output
an extractor rejects, and requests that are not JSON with a bank, go to
``consolidation.dlq`` with the original bytes and why — they never stop a
partition. A backend that is down is retried with backoff, never skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import structlog
from pydantic import TypeAdapter, ValidationError

from cogsub.bus.ports import Consumer, EventBus, Record
from cogsub.consolidation.facts import FactStage, PlannedBatch
from cogsub.consolidation.round import ConsolidationRound
from cogsub.core.errors import CogsubError, FieldProblem, InvalidInputError, UnavailableError
from cogsub.core.events import SafeId
from cogsub.core.memory import ConsolidationReport
from cogsub.core.topics import (
    CONSOLIDATION_DLQ,
    CONSOLIDATION_REQUEST,
    CONSOLIDATION_TOPICS,
    EXPERIENCE_ENRICHED,
    EXPERIENCE_RAW,
    STAGE1_TOPICS,
)
from cogsub.extraction.ports import ExtractionRejected

log = structlog.get_logger("cogsub.consolidation")
T = TypeVar("T")

MAX_BACKOFF_S = 5.0
DLQ_KIND_HEADER = "cogsub-dlq-kind"
DLQ_REASON_HEADER = "cogsub-dlq-reason"
DLQ_SOURCE_HEADER = "cogsub-dlq-source"
CATCH_UP_S = 20.0  # under the SDK's 30 s request timeout, so the caller hears why

Position = tuple[str, int]
"""A partition: ``(topic, partition)``."""


def request_payload(bank_id: str) -> bytes:
    """The ``consolidation.request`` body asking for a round of ``bank_id``."""
    return json.dumps({"bankId": bank_id}).encode()


def requested_bank(value: bytes) -> str:
    """The bank a request names; ``InvalidInputError`` naming the field otherwise."""
    try:
        body = json.loads(value)
        bank = body["bankId"] if isinstance(body, dict) else None
        return TypeAdapter(SafeId).validate_python(bank)
    except (ValueError, KeyError, ValidationError) as exc:
        raise InvalidInputError(
            [FieldProblem("bankId", "a consolidation request needs a valid bank id")]
        ) from exc


def not_yet_committed(
    target: Mapping[Position, int], committed: Mapping[Position, int | None]
) -> int:
    """How many records before ``target`` (a topic's end offsets) a group has not committed."""
    return sum(max(0, end - (committed.get(at) or 0)) for at, end in target.items())


@dataclass(frozen=True)
class Backlog:
    """What a consumer group still has to commit of what a topic held at some moment."""

    bus: EventBus
    interval_s: float = 0.05

    async def ends(self, topic: str) -> dict[Position, int]:
        """The topic's end offsets now: every record acknowledged so far lies before them."""
        stats = await self.bus.topic_stats(topic)
        return {(p.topic, p.partition): p.end_offset for p in stats.partitions}

    async def left(self, topic: str, group: str, target: Mapping[Position, int]) -> int:
        stats = await self.bus.topic_stats(topic, group=group)
        committed = {(p.topic, p.partition): p.committed for p in stats.partitions}
        return not_yet_committed(target, committed)

    async def until_committed(
        self, topic: str, group: str, target: Mapping[Position, int], *, deadline: float
    ) -> None:
        """Return once ``group`` has committed up to ``target``; give up at ``deadline``."""
        while (left := await self.left(topic, group, target)) > 0:
            if time.monotonic() >= deadline:
                raise UnavailableError(
                    f"{left} records of {topic} acknowledged before this call are not yet "
                    f"processed by consumer group {group!r}; is its worker running? "
                    "Try again later."
                )
            await asyncio.sleep(self.interval_s)


class ConsolidationWorker:
    """Consumes enriched events and round requests for every bank."""

    def __init__(
        self,
        *,
        bus: EventBus,
        rounds: ConsolidationRound,
        facts: FactStage | None,
        group: str = "consolidation",
        schedule_s: float = 300.0,
        poll_timeout_s: float = 0.5,
        batch_size: int = 64,
        linger_s: float = 0.25,
        stop_grace_s: float = 10.0,
        on_round: Callable[[ConsolidationReport], None] | None = None,
        ingestion_group: str = "ingestion",
        catch_up_s: float = CATCH_UP_S,
    ) -> None:
        self._bus = bus
        self._backlog = Backlog(bus)
        self._ingestion_group = ingestion_group
        self._catch_up_s = catch_up_s
        self._rounds = rounds
        self._facts = facts
        self._group = group
        self._schedule_s = schedule_s
        self._poll_timeout_s = poll_timeout_s
        self._batch_size = batch_size
        self._linger_s = linger_s
        self._stop_grace_s = stop_grace_s
        self._on_round = on_round
        self._pending_banks: set[str] = set()
        # One round of a bank at a time: a requested round and the scheduled one must
        # not both decay the same epoch (each decays from the value it reads).
        self._bank_rounds: dict[str, asyncio.Lock] = {}

    async def prepare(self) -> None:
        await self._bus.ensure_topics([*STAGE1_TOPICS, *CONSOLIDATION_TOPICS])

    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set; what was polled is finished and committed first.

        Batches are pipelined: the next batch is polled, read and extracted while the
        one before it is written and committed. Writes and commits stay in order, one
        batch at a time, so a commit never covers a batch whose effects are not done.
        """
        await self.prepare()
        consumer = self._bus.consumer(
            [EXPERIENCE_ENRICHED, CONSOLIDATION_REQUEST], group=self._group
        )
        next_round = time.monotonic() + self._schedule_s
        scheduled: asyncio.Task[None] | None = None
        finishing: asyncio.Task[None] | None = None
        try:
            while not stop.is_set():
                records = await self._gather(consumer, stop)
                planned = await self._until_planned(records, stop)
                # The batch before is awaited only to hand over to this one (or once it
                # is done): an idle poll goes on polling while it is written.
                if finishing is not None and (records or finishing.done()):
                    current, finishing = finishing, None
                    await current  # its failure stops the worker: nothing after it commits
                if records:
                    finishing = asyncio.create_task(self._finish(records, planned, consumer, stop))
                if scheduled is not None and scheduled.done():
                    finished: asyncio.Task[None] = scheduled
                    scheduled = None
                    finished.result()  # a round's bug stops the worker, as it would inline
                if scheduled is None and time.monotonic() >= next_round:
                    # A round of a large bank takes seconds: extraction goes on meanwhile.
                    scheduled = asyncio.create_task(self._scheduled_in_background())
                    next_round = time.monotonic() + self._schedule_s
            if finishing is not None:
                current, finishing = finishing, None
                await current
        finally:
            if finishing is not None:
                await self._within_grace(finishing, "batch")
            if scheduled is not None:
                await self._within_grace(scheduled, "round")
            await consumer.close()

    async def _until_planned(
        self, records: list[Record], stop: asyncio.Event
    ) -> PlannedBatch | None:
        """The batch's announcements read and extracted (retried while a backend is down)."""
        extracting = [r.value for r in records if r.topic == EXPERIENCE_ENRICHED]
        if self._facts is None or not extracting:
            return None
        facts = self._facts
        return await self._retrying(lambda: facts.plan_many(extracting), stop, EXPERIENCE_ENRICHED)

    async def _finish(
        self,
        records: list[Record],
        planned: PlannedBatch | None,
        consumer: Consumer,
        stop: asyncio.Event,
    ) -> None:
        """Write the batch's facts, run the rounds it requests, then commit it."""
        if planned is not None and self._facts is not None:
            extracting = [r for r in records if r.topic == EXPERIENCE_ENRICHED]
            await self._until_extracted(self._facts, extracting, planned, stop)
        for record in records:
            if record.topic != EXPERIENCE_ENRICHED:
                await self._until_done(record, stop)
        await self._commit(records, consumer)

    async def _commit(self, records: list[Record], consumer: Consumer) -> None:
        """Commit the batch; one a rebalance refuses is left "not committed yet"."""
        try:
            await consumer.commit(records)
        except CogsubError as exc:
            if not exc.retryable:
                raise
            # Its effects are durable and idempotent (input-derived fact ids, write-once
            # evidence, rounds that add nothing the second time): the partition's next
            # owner reads it again, or a later commit of this member covers it.
            # Retrying here would race the consumer's rejoin.
            log.warning("consolidation_commit_failed", error=str(exc), size=len(records))

    async def _within_grace(self, task: asyncio.Task[None], what: str) -> None:
        """Give ``task`` (a round, or a batch's writes) ``stop_grace_s`` to end, then cancel it.

        Nothing is lost either way. A cancelled round is completed by a later one (its
        outputs have input-derived ids), and a decay cut off mid-bank resumes at its
        last record of where it was. A batch cut off before its commit is delivered
        again, and every step of it is idempotent. A batch is given the time because
        its writes may well succeed where planning the next one failed.
        """
        done, _ = await asyncio.wait({task}, timeout=self._stop_grace_s)
        if not done:
            log.warning(f"consolidation_{what}_abandoned", grace_s=self._stop_grace_s)
            task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception(f"consolidation_{what}_failed")

    async def _scheduled_in_background(self) -> None:
        """The scheduled rounds; a bank whose backend is down waits for the next schedule."""
        banks, self._pending_banks = sorted(self._pending_banks), set()
        for at, bank in enumerate(banks):
            try:
                await self.round_of(bank)
            except CogsubError as exc:
                if not exc.retryable:
                    raise
                log.warning("consolidation_round_postponed", bank_id=bank, error=str(exc))
                self._pending_banks.update(banks[at:])
                return
            except asyncio.CancelledError:
                self._pending_banks.update(banks[at:])
                raise

    async def _gather(self, consumer: Consumer, stop: asyncio.Event) -> list[Record]:
        """A poll, topped up for up to ``linger_s`` so a trickle still makes a full batch.

        Extraction is not on anyone's answer path, and its writes cost a sync per batch
        whatever the batch's size: waiting a moment for more is what keeps up under load.
        """
        records = await self._poll(consumer, self._batch_size, self._poll_timeout_s, stop)
        deadline = time.monotonic() + self._linger_s
        while records and len(records) < self._batch_size and not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            records += await self._poll(consumer, self._batch_size - len(records), left, stop)
        return records

    async def _poll(
        self, consumer: Consumer, max_records: int, timeout_s: float, stop: asyncio.Event
    ) -> list[Record]:
        """A poll; one a rebalance interrupts is tried again (the member rejoins)."""
        try:
            return await self._retrying(
                lambda: consumer.poll(max_records=max_records, timeout_s=timeout_s), stop, "poll"
            )
        except CogsubError as exc:
            if exc.retryable:  # asked to stop meanwhile: nothing was polled
                return []
            raise

    async def scheduled_round(self) -> list[ConsolidationReport]:
        """A round for each bank that received facts since the last scheduled round."""
        banks, self._pending_banks = sorted(self._pending_banks), set()
        return [await self.round_of(bank) for bank in banks]

    async def _retrying(
        self, step: Callable[[], Awaitable[T]], stop: asyncio.Event, topic: str
    ) -> T:
        """Run ``step`` until it succeeds; a backend that is down is waited out with backoff."""
        delay = 0.1
        while True:
            try:
                return await step()
            except CogsubError as exc:
                if not exc.retryable or stop.is_set():
                    raise
                log.warning("consolidation_retrying", topic=topic, error=str(exc))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=delay)
                delay = min(delay * 2, MAX_BACKOFF_S)

    async def _until_done(self, record: Record, stop: asyncio.Event) -> None:
        await self._retrying(lambda: self._request(record), stop, record.topic)

    async def _until_extracted(
        self, facts: FactStage, records: list[Record], planned: PlannedBatch, stop: asyncio.Event
    ) -> None:
        """Write a planned batch (retrying it whole while a backend is down)."""
        outcomes = await self._retrying(
            lambda: facts.write_planned(planned), stop, EXPERIENCE_ENRICHED
        )
        for record, outcome in zip(records, outcomes, strict=True):
            if isinstance(outcome, ExtractionRejected):
                await self._dead_letter(record, "extraction_rejected", outcome.rule)
            elif isinstance(outcome, CogsubError):
                await self._dead_letter(record, "invalid", str(outcome))
            elif outcome.bank_id and (outcome.created or outcome.merged):
                self._pending_banks.add(outcome.bank_id)

    async def _request(self, record: Record) -> None:
        """One ``consolidation.request``: a round of the bank it names, or a dead letter."""
        try:
            bank_id = requested_bank(record.value)
        except InvalidInputError as exc:
            await self._dead_letter(record, "invalid", str(exc))
            return
        await self.round_of(bank_id)

    async def round_of(self, bank_id: str) -> ConsolidationReport:
        """A round of ``bank_id`` now; rounds of one bank never overlap."""
        async with self._bank_rounds.setdefault(bank_id, asyncio.Lock()):
            report = await self._rounds.run(bank_id)
        if self._on_round is not None:
            self._on_round(report)
        return report

    async def round_of_acknowledged(self, bank_id: str) -> ConsolidationReport:
        """A round of ``bank_id`` that sees every memory acknowledged before the call.

        Ingestion announces a memory on ``experience.enriched`` before it commits it,
        so once the ingestion group has passed what ``experience.raw`` held at the
        call, the announcements to extract are all before the enriched topic's end.
        Raises ``UnavailableError`` when that takes longer than ``catch_up_s``.
        """
        deadline = time.monotonic() + self._catch_up_s
        raw = await self._backlog.ends(EXPERIENCE_RAW)
        await self._backlog.until_committed(
            EXPERIENCE_RAW, self._ingestion_group, raw, deadline=deadline
        )
        enriched = await self._backlog.ends(EXPERIENCE_ENRICHED)
        await self._backlog.until_committed(
            EXPERIENCE_ENRICHED, self._group, enriched, deadline=deadline
        )
        return await self.round_of(bank_id)

    async def _dead_letter(self, record: Record, kind: str, reason: str) -> None:
        log.warning("consolidation_dead_letter", topic=record.topic, kind=kind, reason=reason)
        source = f"{record.topic}/{record.partition}/{record.offset}"
        headers = (
            *record.headers,
            (DLQ_KIND_HEADER, kind.encode()),
            (DLQ_REASON_HEADER, reason.encode()[:1000]),
            (DLQ_SOURCE_HEADER, source.encode()),
        )
        await self._bus.publish(CONSOLIDATION_DLQ, record.value, key=record.key, headers=headers)
