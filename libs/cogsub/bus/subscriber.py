"""One consumer runtime: poll ahead, stage, finish, commit in order, retry, dead-letter, stop.

A consumer is a :class:`BatchHandler` (what a batch means) under a
:class:`Subscriber` (how batches flow). The handler splits its work in two:

- ``stage(records)``: work with no effect another batch relies on (parsing,
  embedding, write-once archiving, planning). The runtime stages a batch while
  the next one is polled and while earlier ones finish.
- ``finish(staged)``: the effects (index writes, announcements, rounds). Up to
  ``finishing_depth`` batches finish side by side; each is committed only
  after its own finish and the commit of the batch before it, because commits
  are cumulative per partition.

Every step is retried while it fails retryably (backoff from the error's
``retry_after`` or capped exponential with jitter), and abandoned without a
commit once ``stop`` is set. A commit the bus refuses retryably (a rebalance
took the partition) is "not committed yet": the next owner reads the batch
again, and every effect is idempotent. A batch that fails for good stops the
subscriber, or with a dead-letter topic in the :class:`AckPolicy` is done
record by record so the one record that fails is dead-lettered as ``failed``
and the partition goes on. ``ConfigurationError`` always stops: wrong
settings fail every record alike.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import structlog

from cogsub.bus.dead_letters import DeadLetter, send
from cogsub.bus.middleware import FinishInput, Middleware, StageInput, chained
from cogsub.bus.ports import Consumer, EventBus, Record
from cogsub.bus.retry import Backoff, Stopping, retrying
from cogsub.core.errors import CogsubError, ConfigurationError

log = structlog.get_logger("cogsub.bus.subscriber")

S = TypeVar("S")
O = TypeVar("O")  # noqa: E741 - what one batch did
T = TypeVar("T")

FAILED = "failed"
"""The dead-letter kind of a record that failed for good on its own."""


class BatchHandler(Protocol[S, O]):
    """What a batch of records means; the :class:`Subscriber` decides when each step runs."""

    async def stage(self, records: Sequence[Record]) -> S:
        """Work that may run a batch ahead: nothing another batch depends on."""
        ...

    async def finish(self, staged: S) -> O:
        """The batch's effects; it is committed after this returns."""
        ...

    def merged(self, parts: Sequence[O | DeadLetter]) -> O:
        """What a batch done record by record did, from each record's part."""
        ...

    def committed(self, outcome: O) -> None:
        """The batch's commit is stored (not called when the bus refused it)."""
        ...


@dataclass(frozen=True)
class AckPolicy:
    """What becomes of a batch that fails for good.

    Without ``dead_letter_topic`` the subscriber stops and the batch stays
    uncommitted, to be delivered again once the cause is fixed. With one, the
    batch is done record by record and a record that fails alone is sent there.
    """

    dead_letter_topic: str | None = None


@dataclass(frozen=True)
class Subscription:
    """Which records, for which group, in what batches. ``name`` prefixes the log events."""

    name: str
    topics: tuple[str, ...]
    group: str
    batch_size: int = 256
    poll_timeout_s: float = 0.5
    linger_s: float = 0.0
    finishing_depth: int = 1
    stop_grace_s: float = 10.0
    backoff: Backoff = field(default_factory=Backoff)

    def __post_init__(self) -> None:
        if self.finishing_depth < 1:
            raise ConfigurationError("finishing_depth must be at least 1")


class _Split:
    """A batch whose stage failed for good: it is done record by record instead."""


_SPLIT = _Split()


class Subscriber(Generic[S, O]):
    """Runs a :class:`BatchHandler` over a consumer group of ``bus``."""

    def __init__(
        self,
        bus: EventBus,
        subscription: Subscription,
        handler: BatchHandler[S, O],
        *,
        middlewares: Sequence[Middleware] = (),
        acks: AckPolicy | None = None,
    ) -> None:
        self._bus = bus
        self._sub = subscription
        self._handler = handler
        self._acks = acks or AckPolicy()
        self._middlewares = tuple(middlewares)
        self._send = chained(middlewares, _around_dead_letter, self._publish)
        self._stop: asyncio.Event | None = None

    @property
    def subscription(self) -> Subscription:
        return self._sub

    async def run(
        self, stop: asyncio.Event, *, on_batch: Callable[[O], None] | None = None
    ) -> None:
        """Consume until ``stop`` is set; batches in hand get ``stop_grace_s`` to finish.

        ``on_batch`` hears each batch's outcome once it is committed, in order.
        """
        self._stop = stop
        report = on_batch or _ignore
        consumer = self._bus.consumer(list(self._sub.topics), group=self._sub.group)
        flight = _InFlight(self._sub.finishing_depth)
        polled: list[Record] = []
        polling: asyncio.Task[list[Record]] | None = None
        try:
            while not stop.is_set():
                if not polled:
                    flight.collect()
                    polled = await self._gather(consumer)
                    continue
                # The next poll runs while this batch is staged.
                polling = asyncio.create_task(self._gather(consumer))
                staged = await self._staged_or_split(polled)
                upcoming, polling = await polling, None
                if isinstance(staged, _Split):
                    await flight.drain()
                    outcome = await self._isolated(polled)
                    await self._commit(polled, consumer, outcome)
                    report(outcome)
                else:
                    await flight.room()
                    flight.add(self._finish_in_turn(polled, staged, consumer, flight.last, report))
                polled = upcoming
        except Stopping:
            log.warning(f"{self._sub.name}_stopped_while_retrying")  # uncommitted: read again
        finally:
            if polling is not None:  # polled but never staged: delivered again
                await _abandoned(polling)
            failures = await flight.settle(self._sub.stop_grace_s, self._sub.name)
            await consumer.close()
        if failures:  # stopping as asked, but a batch in hand failed for good
            raise failures[0]

    async def process(self, records: Sequence[Record], consumer: Consumer) -> O:
        """Stage, finish and commit one batch now, record by record if it fails for good."""
        outcome = await self._isolated(records)
        await self._commit(records, consumer, outcome)
        return outcome

    async def _gather(self, consumer: Consumer) -> list[Record]:
        """A poll, topped up for up to ``linger_s`` so a trickle still makes a full batch."""
        size = self._sub.batch_size
        records = await self._poll(consumer, size, self._sub.poll_timeout_s)
        deadline = time.monotonic() + self._sub.linger_s
        while records and len(records) < size and not self._stopped():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            records += await self._poll(consumer, size - len(records), left)
        return records

    async def _poll(self, consumer: Consumer, max_records: int, timeout_s: float) -> list[Record]:
        return await self._retrying(
            lambda: consumer.poll(max_records=max_records, timeout_s=timeout_s)
        )

    async def _staged_or_split(self, records: Sequence[Record]) -> S | _Split:
        try:
            return await self._retrying(lambda: self._staged(records))
        except ConfigurationError:
            raise
        except Exception as exc:
            if self._acks.dead_letter_topic is None:
                raise
            log.warning(f"{self._sub.name}_batch_split", error=str(exc), size=len(records))
            return _SPLIT

    async def _finish_in_turn(
        self,
        records: Sequence[Record],
        staged: S,
        consumer: Consumer,
        after: asyncio.Task[None] | None,
        report: Callable[[O], None],
    ) -> None:
        """Finish ``staged``, then commit it once ``after`` (the batch before) has committed."""
        try:
            outcome = await self._retrying(lambda: self._finished(records, staged))
        except ConfigurationError:
            raise
        except Exception as exc:
            if self._acks.dead_letter_topic is None:
                raise
            log.warning(f"{self._sub.name}_batch_split", error=str(exc), size=len(records))
            outcome = await self._isolated(records)
        if after is not None:
            await asyncio.shield(after)  # its failure is ours too: nothing after it commits
        await self._commit(records, consumer, outcome)
        report(outcome)

    async def _isolated(self, records: Sequence[Record]) -> O:
        """Stage and finish ``records``; if that fails for good, find the culprit one by one."""
        try:
            return await self._once(records)
        except ConfigurationError:
            raise
        except Exception as exc:
            topic = self._acks.dead_letter_topic
            if topic is None:
                raise
            if len(records) > 1:
                log.warning(f"{self._sub.name}_batch_split", error=str(exc), size=len(records))
                return self._handler.merged([await self._isolated([r]) for r in records])
            log.exception(f"{self._sub.name}_record_failed", offset=records[0].offset)
            reason = f"{type(exc).__name__}: {exc}"
            letter = DeadLetter.of(topic, records[0], FAILED, reason)
            await self._retrying(lambda: self._send(letter))
            return self._handler.merged([letter])

    async def _once(self, records: Sequence[Record]) -> O:
        """Stage ``records``, then finish that staged batch, each retried on its own.

        A retried finish meets the batch it started with, as on the pipelined path:
        staging again would redo the work, and forget what the finish already did
        (a handler keeps that on its staged batch, such as the letters it has sent).
        """
        staged = await self._retrying(lambda: self._staged(records))
        return await self._retrying(lambda: self._finished(records, staged))

    async def _staged(self, records: Sequence[Record]) -> S:
        call = StageInput(self._sub.group, records)
        step = chained(self._middlewares, _around_stage, lambda _: self._handler.stage(records))
        return await step(call)

    async def _finished(self, records: Sequence[Record], staged: S) -> O:
        call = FinishInput(self._sub.group, records)
        step = chained(self._middlewares, _around_finish, lambda _: self._handler.finish(staged))
        return await step(call)

    async def dead_letter(self, letter: DeadLetter) -> None:
        """Send a letter the handler decided on, through the middlewares as the runtime's own."""
        await self._send(letter)

    async def _publish(self, letter: DeadLetter) -> None:
        log.warning(
            "event_dead_lettered",
            kind=letter.kind,
            reason=letter.reason,
            partition=letter.record.partition,
            offset=letter.record.offset,
        )
        await send(self._bus, letter)

    async def _commit(self, records: Sequence[Record], consumer: Consumer, outcome: O) -> None:
        try:
            await consumer.commit(records)
        except CogsubError as exc:
            if not exc.retryable:
                raise
            # A rebalance took the partition away: the effects are durable and idempotent,
            # the next owner re-reads from the last commit, and a later commit covers it.
            # Retrying in place would race the consumer's rejoin.
            log.warning(f"{self._sub.name}_commit_failed", error=str(exc), size=len(records))
            return
        self._handler.committed(outcome)

    async def _retrying(self, step: Callable[[], Awaitable[T]]) -> T:
        return await retrying(
            step,
            backoff=self._sub.backoff,
            stop=self._stop,
            log=log,
            event=f"{self._sub.name}_step_retry",
        )

    def _stopped(self) -> bool:
        return self._stop is not None and self._stop.is_set()


def _around_stage(
    middleware: Middleware, call: StageInput, proceed: Callable[[StageInput], Awaitable[T]]
) -> Awaitable[T]:
    return middleware.stage(call, proceed)


def _around_finish(
    middleware: Middleware, call: FinishInput, proceed: Callable[[FinishInput], Awaitable[T]]
) -> Awaitable[T]:
    return middleware.finish(call, proceed)


def _around_dead_letter(
    middleware: Middleware, letter: DeadLetter, proceed: Callable[[DeadLetter], Awaitable[None]]
) -> Awaitable[None]:
    return middleware.dead_letter(letter, proceed)


def _ignore(_: object) -> None:
    return None


async def _abandoned(polling: asyncio.Task[list[Record]]) -> None:
    """Wait out a poll left running at shutdown; what it got is delivered again."""
    polling.cancel()
    try:
        await polling
    except BaseException:  # cancelled, or the poll itself failed: nothing to clean up
        return


class _InFlight:
    """The batches finishing now, oldest first; each commits after the one before it."""

    def __init__(self, depth: int) -> None:
        self._depth = depth
        self._tasks: deque[asyncio.Task[None]] = deque()

    @property
    def last(self) -> asyncio.Task[None] | None:
        return self._tasks[-1] if self._tasks else None

    def add(self, finishing: Coroutine[Any, Any, None]) -> None:
        self._tasks.append(asyncio.create_task(finishing))

    def collect(self) -> None:
        """Forget the batches that are done; a failed one fails the caller."""
        while self._tasks and self._tasks[0].done():
            self._tasks.popleft().result()

    async def room(self) -> None:
        """Return once fewer than ``depth`` batches are finishing."""
        self.collect()
        while len(self._tasks) >= self._depth:
            await self._tasks.popleft()

    async def drain(self) -> None:
        while self._tasks:
            await self._tasks.popleft()

    async def settle(self, grace_s: float, name: str) -> list[BaseException]:
        """Give what is in flight ``grace_s`` to land, cancel the rest; their failures.

        Nothing is lost by cancelling: a batch cut off before its commit is
        delivered again, and every step of it is idempotent.
        """
        tasks, self._tasks = list(self._tasks), deque()
        if not tasks:
            return []
        _, late = await asyncio.wait(tasks, timeout=grace_s)
        if late:
            log.warning(f"{name}_batch_abandoned", grace_s=grace_s, batches=len(late))
        for task in late:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        failures = [
            r
            for r in results
            if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError | Stopping)
        ]
        for failure in failures:
            log.warning(f"{name}_batch_failed", error=repr(failure))
        return failures
