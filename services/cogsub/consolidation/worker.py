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
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import structlog
from pydantic import TypeAdapter, ValidationError

from cogsub.bus.dead_letters import DeadLetter
from cogsub.bus.middleware import ConsumerSpans, LogContext, Middleware
from cogsub.bus.ports import EventBus, Record
from cogsub.bus.retry import Backoff, pause
from cogsub.bus.subscriber import Subscriber, Subscription
from cogsub.consolidation.facts import ExtractionOutcome, FactStage, PlannedBatch
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

_MAX_REASON_CHARS = 1000  # an extractor's reason may quote its whole output
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


@dataclass
class _Batch:
    """A batch planned ahead; ``finish`` resumes after the last step it completed.

    The runtime retries a finish whole while a backend is down, so what is done
    (the write, each dead letter, each requested round) is not done again.
    """

    records: Sequence[Record]
    planned: PlannedBatch | None
    outcomes: list[ExtractionOutcome | CogsubError] | None = None
    seen: int = 0  # outcomes acted on (dead-lettered or noted)
    requests_done: int = 0


class ConsolidationWorker:
    """Consumes enriched events and round requests for every bank.

    It is the handler of its subscription: ``stage`` reads and extracts a batch
    (no effects, so it runs while the batch before is written), ``finish``
    writes the facts and runs the requested rounds, and the runtime commits.
    """

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
        messaging_system: str = "sqlite",
        backoff: Backoff | None = None,
        middlewares: Sequence[Middleware] = (),
    ) -> None:
        self._bus = bus
        self._backlog = Backlog(bus)
        self._ingestion_group = ingestion_group
        self._catch_up_s = catch_up_s
        self._rounds = rounds
        self._facts = facts
        self._group = group
        self._schedule_s = schedule_s
        self._stop_grace_s = stop_grace_s
        self._on_round = on_round
        self._pending_banks: set[str] = set()
        # One round of a bank at a time: a requested round and the scheduled one must
        # not both decay the same epoch (each decays from the value it reads).
        self._bank_rounds: dict[str, asyncio.Lock] = {}
        subscription = Subscription(
            name="consolidation",
            topics=(EXPERIENCE_ENRICHED, CONSOLIDATION_REQUEST),
            group=group,
            batch_size=batch_size,
            poll_timeout_s=poll_timeout_s,
            linger_s=linger_s,
            stop_grace_s=stop_grace_s,
            backoff=backoff or Backoff(),
        )
        chain = [
            LogContext(),
            ConsumerSpans("consolidation.process", messaging_system=messaging_system),
            *middlewares,
        ]
        # No dead-letter topic in the ack policy: a batch that fails for good is a bug
        # or a store refusing for good, and stops the worker; bad input is dead-lettered
        # by ``finish`` itself.
        self._subscriber = Subscriber(bus, subscription, self, middlewares=chain)

    async def prepare(self) -> None:
        await self._bus.ensure_topics([*STAGE1_TOPICS, *CONSOLIDATION_TOPICS])

    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set; what was polled is finished and committed first.

        The next batch is polled, read and extracted while the one before it is
        written and committed (the runtime's pipelining, one batch finishing at a
        time), and the scheduled rounds run beside both.
        """
        await self.prepare()
        halt = asyncio.Event()  # stop, or a scheduled round's bug
        following = asyncio.create_task(_follow(stop, halt))
        failures: list[BaseException] = []
        scheduling = asyncio.create_task(self._schedule(halt, failures))
        try:
            await self._subscriber.run(halt)
        finally:
            halt.set()
            following.cancel()
            await self._within_grace(scheduling, "round")
        if failures:
            raise failures[0]  # a round's bug stops the worker, as it would inline

    async def stage(self, records: Sequence[Record]) -> _Batch:
        """The batch's announcements read and extracted; nothing is written."""
        extracting = [r.value for r in records if r.topic == EXPERIENCE_ENRICHED]
        if self._facts is None or not extracting:
            return _Batch(records, None)
        return _Batch(records, await self._facts.plan_many(extracting))

    async def finish(self, batch: _Batch) -> None:
        """Write the batch's facts, then run the rounds it requests (in order)."""
        if batch.planned is not None and self._facts is not None:
            if batch.outcomes is None:
                batch.outcomes = await self._facts.write_planned(batch.planned)
            await self._act_on(batch)
        requests = [r for r in batch.records if r.topic != EXPERIENCE_ENRICHED]
        for record in requests[batch.requests_done :]:
            await self._request(record)
            batch.requests_done += 1

    def merged(self, parts: Sequence[None | DeadLetter]) -> None:
        return None  # the ack policy never splits a batch

    def committed(self, outcome: None) -> None:
        return None

    async def _act_on(self, batch: _Batch) -> None:
        """Dead-letter what extraction refused; note the banks that got facts."""
        extracted = [r for r in batch.records if r.topic == EXPERIENCE_ENRICHED]
        outcomes = batch.outcomes or []
        for record, outcome in list(zip(extracted, outcomes, strict=True))[batch.seen :]:
            if isinstance(outcome, ExtractionRejected):
                await self._dead_letter(record, "extraction_rejected", outcome.rule)
            elif isinstance(outcome, CogsubError):
                await self._dead_letter(record, "invalid", str(outcome))
            elif outcome.bank_id and (outcome.created or outcome.merged):
                self._pending_banks.add(outcome.bank_id)
            batch.seen += 1

    async def _schedule(self, halt: asyncio.Event, failures: list[BaseException]) -> None:
        """Every ``schedule_s``, the banks that got facts since get a round.

        A round of a large bank takes seconds: it runs beside extraction, not in it.
        """
        try:
            while not halt.is_set():
                await pause(self._schedule_s, halt)
                if not halt.is_set():
                    await self._scheduled_in_background()
        except Exception as exc:
            if halt.is_set():
                raise  # stopping anyway: logged by the grace period
            failures.append(exc)
            halt.set()

    async def _within_grace(self, task: asyncio.Task[None], what: str) -> None:
        """Give ``task`` (a round) ``stop_grace_s`` to end, then cancel it.

        Nothing is lost either way. A cancelled round is completed by a later one (its
        outputs have input-derived ids), and a decay cut off mid-bank resumes at its
        last record of where it was.
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

    async def scheduled_round(self) -> list[ConsolidationReport]:
        """A round for each bank that received facts since the last scheduled round."""
        banks, self._pending_banks = sorted(self._pending_banks), set()
        return [await self.round_of(bank) for bank in banks]

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
        letter = DeadLetter.of(CONSOLIDATION_DLQ, record, kind, reason[:_MAX_REASON_CHARS])
        await self._subscriber.dead_letter(letter)


async def _follow(stop: asyncio.Event, halt: asyncio.Event) -> None:
    await stop.wait()
    halt.set()
