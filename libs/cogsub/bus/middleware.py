"""Middlewares: what wraps every step of a subscriber without being part of the business.

A middleware gets one typed input per call and the next layer to call
(``proceed``), as an interceptor does: it may look at the input, replace it,
time the call, or run it inside a context. The base class passes everything
through, so a middleware overrides only the calls it wraps.

Here: per-batch log context (:class:`LogContext`), a consumer span per record
joined to the producer's trace (:class:`ConsumerSpans`), a failed span for
every dead letter the runtime sends, whose context travels on the letter
(:class:`TracedDeadLetters`), and each step's time, records and dead letters
counted for the process's metrics (:class:`ConsumerMetrics`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

import structlog
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from cogsub.bus.dead_letters import DeadLetter
from cogsub.bus.ports import Record
from cogsub.telemetry import attributes as attr
from cogsub.telemetry.tracing import context_from_headers, headers_with_context, tracer

T = TypeVar("T")
I = TypeVar("I")  # noqa: E741 - the input of one call


@dataclass(frozen=True)
class StageInput:
    """A polled batch about to be staged (work that may run a batch ahead)."""

    group: str
    records: Sequence[Record]


@dataclass(frozen=True)
class FinishInput:
    """A staged batch about to be finished (its effects; the commit follows)."""

    group: str
    records: Sequence[Record]


class Middleware:
    """Passes every call through; subclasses wrap the ones they care about."""

    async def stage(self, call: StageInput, proceed: Callable[[StageInput], Awaitable[T]]) -> T:
        return await proceed(call)

    async def finish(self, call: FinishInput, proceed: Callable[[FinishInput], Awaitable[T]]) -> T:
        return await proceed(call)

    async def dead_letter(
        self, letter: DeadLetter, proceed: Callable[[DeadLetter], Awaitable[None]]
    ) -> None:
        await proceed(letter)


Around = Callable[[Middleware, I, Callable[[I], Awaitable[T]]], Awaitable[T]]


def chained(
    middlewares: Sequence[Middleware], around: Around[I, T], inner: Callable[[I], Awaitable[T]]
) -> Callable[[I], Awaitable[T]]:
    """``inner`` wrapped by every middleware, the first one outermost."""
    call = inner
    for middleware in reversed(middlewares):
        call = _layer(middleware, around, call)
    return call


def _layer(
    middleware: Middleware, around: Around[I, T], proceed: Callable[[I], Awaitable[T]]
) -> Callable[[I], Awaitable[T]]:
    async def call(value: I) -> T:
        return await around(middleware, value, proceed)

    return call


def log_context(group: str, records: Sequence[Record]) -> dict[str, object]:
    """What every log line about ``records`` should say about where they came from.

    One record: its topic, partition, offset and key (the event id, for every
    topic keyed by one). A batch: what its records share, and the offsets it spans.
    """
    context: dict[str, object] = {"consumer_group": group}
    if not records:
        return context
    topics = {r.topic for r in records}
    partitions = {(r.topic, r.partition) for r in records}
    if len(topics) == 1:
        context["topic"] = records[0].topic
    if len(partitions) == 1:
        context["partition"] = records[0].partition
        offsets = [r.offset for r in records]
        low, high = min(offsets), max(offsets)
        context["offset"] = low if low == high else f"{low}-{high}"
    if len(records) == 1 and records[0].key is not None:
        context["event_id"] = records[0].key.decode("utf-8", "replace")
    return context


class LogContext(Middleware):
    """Binds :func:`log_context` for the duration of each step (structlog contextvars)."""

    async def stage(self, call: StageInput, proceed: Callable[[StageInput], Awaitable[T]]) -> T:
        with structlog.contextvars.bound_contextvars(**log_context(call.group, call.records)):
            return await proceed(call)

    async def finish(self, call: FinishInput, proceed: Callable[[FinishInput], Awaitable[T]]) -> T:
        with structlog.contextvars.bound_contextvars(**log_context(call.group, call.records)):
            return await proceed(call)

    async def dead_letter(
        self, letter: DeadLetter, proceed: Callable[[DeadLetter], Awaitable[None]]
    ) -> None:
        context = log_context(letter.record.topic, [letter.record])
        del context["consumer_group"]
        with structlog.contextvars.bound_contextvars(**context):
            await proceed(letter)


def _consumer_attributes(record: Record, *, group: str, system: str) -> dict[str, str | int]:
    return {
        attr.MESSAGING_SYSTEM: system,
        attr.MESSAGING_DESTINATION_NAME: record.topic,
        attr.MESSAGING_OPERATION_TYPE: "process",
        attr.MESSAGING_OPERATION_NAME: "process",
        attr.MESSAGING_CONSUMER_GROUP_NAME: group,
        attr.MESSAGING_DESTINATION_PARTITION_ID: str(record.partition),
        attr.MESSAGING_KAFKA_OFFSET: record.offset,
    }


class ConsumerSpans(Middleware):
    """A ``name`` span per record, child of the producer's context in its headers.

    It covers the record from the start of its batch's stage to the end of its
    finish, which is how long the record took here, waiting included. A batch
    whose finish fails marks its spans as errors.
    """

    def __init__(self, name: str, *, messaging_system: str) -> None:
        self._name = name
        self._system = messaging_system
        self._staged_at: dict[tuple[str, int, int], int] = {}

    async def stage(self, call: StageInput, proceed: Callable[[StageInput], Awaitable[T]]) -> T:
        if call.records:
            self._staged_at[_first(call.records)] = time.time_ns()
        return await proceed(call)

    async def finish(self, call: FinishInput, proceed: Callable[[FinishInput], Awaitable[T]]) -> T:
        started = self._staged_at.pop(_first(call.records), None) if call.records else None
        spans = [self._span(r, call.group, started) for r in call.records]
        try:
            return await proceed(call)
        except Exception as exc:
            for span in spans:
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            for span in spans:
                span.end()

    def _span(self, record: Record, group: str, started: int | None) -> Span:
        return tracer().start_span(
            self._name,
            context=context_from_headers(record.headers),
            kind=SpanKind.CONSUMER,
            start_time=started,
            attributes=_consumer_attributes(record, group=group, system=self._system),
        )


def _first(records: Sequence[Record]) -> tuple[str, int, int]:
    record = records[0]
    return record.topic, record.partition, record.offset


class TracedDeadLetters(Middleware):
    """A failed ``name`` span for each dead letter; the letter carries its context on."""

    def __init__(self, name: str, *, group: str, messaging_system: str) -> None:
        self._name = name
        self._group = group
        self._system = messaging_system

    async def dead_letter(
        self, letter: DeadLetter, proceed: Callable[[DeadLetter], Awaitable[None]]
    ) -> None:
        record = letter.record
        span = tracer().start_span(
            self._name,
            context=context_from_headers(record.headers),
            kind=SpanKind.CONSUMER,
            attributes=_consumer_attributes(record, group=self._group, system=self._system),
        )
        span.set_attributes(
            {attr.COG_DLQ_KIND: letter.kind, attr.COG_DLQ_REASON: letter.reason[:512]}
        )
        span.set_status(Status(StatusCode.ERROR, letter.kind))
        try:
            headers = headers_with_context(letter.headers, trace.set_span_in_context(span))
            await proceed(replace(letter, headers=headers))
        finally:
            span.end()


class ConsumerMeter(Protocol):
    """Where :class:`ConsumerMetrics` reports (the process's metrics registry)."""

    def observe_consumer_step(
        self, *, group: str, step: str, seconds: float, records: int, failed: bool
    ) -> None: ...

    def count_consumer_dead_letter(self, *, group: str, topic: str, kind: str) -> None: ...


class ConsumerMetrics(Middleware):
    """Times every stage and finish of ``group``, with its records, and counts dead letters.

    A step that raises is observed as failed (the runtime retries or dead-letters
    it), so a retry storm shows as failed steps rather than as silence.
    """

    def __init__(self, meter: ConsumerMeter, *, group: str) -> None:
        self._meter = meter
        self._group = group

    async def stage(self, call: StageInput, proceed: Callable[[StageInput], Awaitable[T]]) -> T:
        return await self._timed("stage", len(call.records), proceed, call)

    async def finish(self, call: FinishInput, proceed: Callable[[FinishInput], Awaitable[T]]) -> T:
        return await self._timed("finish", len(call.records), proceed, call)

    async def dead_letter(
        self, letter: DeadLetter, proceed: Callable[[DeadLetter], Awaitable[None]]
    ) -> None:
        await proceed(letter)
        self._meter.count_consumer_dead_letter(
            group=self._group, topic=letter.record.topic, kind=letter.kind
        )

    async def _timed(
        self, step: str, records: int, proceed: Callable[[I], Awaitable[T]], call: I
    ) -> T:
        started = time.perf_counter()
        failed = True
        try:
            result = await proceed(call)
            failed = False
            return result
        finally:
            self._meter.observe_consumer_step(
                group=self._group,
                step=step,
                seconds=time.perf_counter() - started,
                records=records,
                failed=failed,
            )
