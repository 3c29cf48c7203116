"""The consumer runtime on the in-memory bus: order, retries, dead letters, stop, commits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest
import structlog
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cogsub.bus.dead_letters import (
    DLQ_KIND_HEADER,
    DLQ_REASON_HEADER,
    DLQ_SOURCE_HEADER,
    DeadLetter,
)
from cogsub.bus.memory import InMemoryEventBus
from cogsub.bus.middleware import ConsumerMetrics, LogContext, TracedDeadLetters, log_context
from cogsub.bus.ports import Consumer, Record
from cogsub.bus.retry import Backoff
from cogsub.bus.subscriber import AckPolicy, Subscriber, Subscription
from cogsub.core.errors import ConfigurationError, UnavailableError
from cogsub.core.topics import TopicSpec
from cogsub.telemetry.metrics import Metrics
from cogsub.telemetry.tracing import context_from_headers

TOPIC, DLQ, GROUP = "work", "work.dlq", "workers"
FAST = Backoff(initial_s=0.001, max_s=0.005)


@dataclass
class Handler:
    """Stages a batch to its values, finishes by recording them; hooks to misbehave."""

    finished: list[list[bytes]] = field(default_factory=list)
    commits: list[list[bytes]] = field(default_factory=list)
    hold_first_finish: asyncio.Event | None = None
    stage_failures: list[Exception] = field(default_factory=list)
    poison: bytes | None = None
    contexts: list[dict[str, object]] = field(default_factory=list)

    async def stage(self, records: Sequence[Record]) -> list[bytes]:
        self.contexts.append(structlog.contextvars.get_contextvars())
        if self.stage_failures:
            raise self.stage_failures.pop(0)
        return [r.value for r in records]

    async def finish(self, staged: list[bytes]) -> list[bytes]:
        if self.poison in staged:
            raise ValueError("cannot digest this")
        if self.hold_first_finish is not None and not self.finished:
            self.finished.append([])  # marks the first finish as started
            await self.hold_first_finish.wait()
            self.finished[0] = staged
            return staged
        self.finished.append(staged)
        return staged

    def merged(self, parts: Sequence[list[bytes] | DeadLetter]) -> list[bytes]:
        return [v for part in parts if not isinstance(part, DeadLetter) for v in part]

    def committed(self, outcome: list[bytes]) -> None:
        self.commits.append(outcome)


async def _bus(values: Sequence[bytes]) -> InMemoryEventBus:
    bus = InMemoryEventBus()
    await bus.ensure_topics([TopicSpec(TOPIC, 1), TopicSpec(DLQ, 1)])
    for value in values:
        await bus.publish(TOPIC, value, key=value, headers=(("origin", b"test"),))
    return bus


def _subscriber(
    bus: object, handler: Handler, *, depth: int = 1, dlq: bool = True, **tuning: object
) -> Subscriber[list[bytes], list[bytes]]:
    subscription = Subscription(
        name="work",
        topics=(TOPIC,),
        group=GROUP,
        batch_size=2,
        poll_timeout_s=0.01,
        finishing_depth=depth,
        backoff=FAST,
        **tuning,  # type: ignore[arg-type]
    )
    acks = AckPolicy(dead_letter_topic=DLQ if dlq else None)
    return Subscriber(bus, subscription, handler, acks=acks, middlewares=[LogContext()])  # type: ignore[arg-type]


async def _lag(bus: InMemoryEventBus) -> int:
    return (await bus.topic_stats(TOPIC, group=GROUP)).lag


async def _until(holds: Callable[[], bool]) -> None:
    for _ in range(2_000):
        if holds():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the condition never held")


async def _until_committed(bus: InMemoryEventBus) -> None:
    for _ in range(2_000):
        if not await _lag(bus):
            return
        await asyncio.sleep(0.005)
    raise AssertionError("never committed")


async def _run_until(subscriber: Subscriber[list[bytes], list[bytes]], done: int) -> list[bytes]:
    """Run until ``done`` values were reported, then stop; what was reported, in order."""
    stop = asyncio.Event()
    reported: list[bytes] = []

    def report(outcome: list[bytes]) -> None:
        reported.extend(outcome)
        if len(reported) >= done:
            stop.set()

    await asyncio.wait_for(subscriber.run(stop, on_batch=report), timeout=10)
    return reported


async def test_batches_finish_side_by_side_and_commit_in_order() -> None:
    bus = await _bus([b"a", b"b", b"c", b"d"])
    handler = Handler(hold_first_finish=asyncio.Event())
    stop = asyncio.Event()
    running = asyncio.create_task(_subscriber(bus, handler, depth=2).run(stop))
    await _until(lambda: len(handler.finished) == 2)  # the second finishes, the first held
    assert handler.finished == [[], [b"c", b"d"]]
    assert handler.commits == [] and await _lag(bus) == 4  # it may not commit before the first
    handler.hold_first_finish.set()  # type: ignore[union-attr]
    await _until_committed(bus)
    stop.set()
    await running
    assert handler.commits == [[b"a", b"b"], [b"c", b"d"]]


async def test_a_retryable_failure_is_retried_with_backoff_and_the_servers_hint() -> None:
    hinted = UnavailableError("throttled")
    hinted.retry_after = 0.003  # type: ignore[attr-defined]
    bus = await _bus([b"a"])
    handler = Handler(stage_failures=[UnavailableError("down"), hinted])
    with structlog.testing.capture_logs() as logs:
        assert await _run_until(_subscriber(bus, handler), 1) == [b"a"]
    retries = [e for e in logs if e["event"] == "work_step_retry"]
    assert [e["attempt"] for e in retries] == [0, 1]
    assert FAST.initial_s / 2 <= retries[0]["delay_s"] <= FAST.initial_s
    assert retries[1]["delay_s"] == 0.003
    assert await bus.read(DLQ, 0, offset=0, max_records=10) == []


def test_backoff_grows_to_its_cap_and_honours_a_hint_up_to_the_cap() -> None:
    backoff = Backoff(initial_s=0.1, max_s=1.0, jitter=lambda: 1.0)
    assert [backoff.delay(n) for n in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert Backoff(initial_s=0.1, jitter=lambda: 0.0).delay(0) == 0.05  # half, at the least
    assert backoff.delay(0, retry_after=0.7) == 0.7
    assert backoff.delay(0, retry_after=60) == 1.0


async def test_a_record_that_fails_for_good_is_dead_lettered_with_the_shared_headers() -> None:
    bus = await _bus([b"a", b"bad", b"c"])
    handler = Handler(poison=b"bad")
    assert await _run_until(_subscriber(bus, handler), 2) == [b"a", b"c"]
    (letter,) = await bus.read(DLQ, 0, offset=0, max_records=10)
    assert letter.value == letter.key == b"bad"
    assert [name for name, _ in letter.headers][:4] == [
        "origin",
        DLQ_KIND_HEADER,
        DLQ_REASON_HEADER,
        DLQ_SOURCE_HEADER,
    ]
    assert letter.header(DLQ_KIND_HEADER) == b"failed"
    assert letter.header(DLQ_REASON_HEADER) == b"ValueError: cannot digest this"
    assert letter.header(DLQ_SOURCE_HEADER) == f"{TOPIC}/0/1".encode()
    assert await _lag(bus) == 0


def _sample(metrics: Metrics, name: str, **labels: str) -> float:
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0


async def test_consumer_metrics_time_each_step_count_its_records_and_its_dead_letters() -> None:
    bus = await _bus([b"a", b"bad", b"c"])
    metrics = Metrics()
    subscription = Subscription(
        name="work", topics=(TOPIC,), group=GROUP, batch_size=2, poll_timeout_s=0.01, backoff=FAST
    )
    subscriber = Subscriber(
        bus,
        subscription,
        Handler(poison=b"bad"),
        acks=AckPolicy(dead_letter_topic=DLQ),
        middlewares=[ConsumerMetrics(metrics, group=GROUP)],
    )
    assert await _run_until(subscriber, 2) == [b"a", b"c"]  # type: ignore[arg-type]
    # [a, bad] fails to finish, is split and retried one by one; [c] finishes at once.
    failed = _sample(
        metrics, "cogsub_consumer_step_seconds_count", group=GROUP, step="finish", outcome="failed"
    )
    ok = _sample(
        metrics, "cogsub_consumer_step_seconds_count", group=GROUP, step="finish", outcome="ok"
    )
    assert failed >= 1 and ok >= 2
    staged = _sample(metrics, "cogsub_consumer_records_total", group=GROUP, step="stage")
    assert staged >= 3  # every record staged at least once
    dead = {"group": GROUP, "topic": TOPIC, "kind": "failed"}
    assert _sample(metrics, "cogsub_consumer_dead_letters_total", **dead) == 1


async def test_without_a_dead_letter_topic_a_failure_stops_and_nothing_is_committed() -> None:
    bus = await _bus([b"bad"])
    handler = Handler(poison=b"bad")
    with pytest.raises(ValueError, match="cannot digest"):
        await asyncio.wait_for(_subscriber(bus, handler, dlq=False).run(asyncio.Event()), 10)
    assert await _lag(bus) == 1
    assert await bus.read(DLQ, 0, offset=0, max_records=10) == []


async def test_wrong_settings_stop_even_with_a_dead_letter_topic() -> None:
    bus = await _bus([b"a"])
    handler = Handler(stage_failures=[ConfigurationError("no such model")])
    with pytest.raises(ConfigurationError):
        await asyncio.wait_for(_subscriber(bus, handler).run(asyncio.Event()), 10)
    assert await _lag(bus) == 1
    assert await bus.read(DLQ, 0, offset=0, max_records=10) == []


async def test_stop_is_honoured_while_a_backend_stays_down() -> None:
    bus = await _bus([b"a", b"b"])
    handler = Handler(stage_failures=[UnavailableError("down")] * 10_000)
    stop = asyncio.Event()
    running = asyncio.create_task(_subscriber(bus, handler).run(stop))
    await asyncio.sleep(0.1)  # retrying by now
    stop.set()
    await asyncio.wait_for(running, timeout=5)
    assert await _lag(bus) == 2 and handler.commits == []


class RefusesFirstCommit:
    """A consumer whose first commit fails as a Kafka rebalance makes it fail."""

    def __init__(self, inner: Consumer) -> None:
        self._inner = inner
        self.refused = 0

    async def poll(self, *, max_records: int, timeout_s: float) -> list[Record]:
        return await self._inner.poll(max_records=max_records, timeout_s=timeout_s)

    async def commit(self, records: Sequence[Record]) -> None:
        if not self.refused:
            self.refused += 1
            raise UnavailableError("CommitFailedError (the group rebalanced)")
        await self._inner.commit(records)

    async def close(self) -> None:
        await self._inner.close()


class RebalancingBus:
    def __init__(self, inner: InMemoryEventBus) -> None:
        self._inner = inner
        self.consumers: list[RefusesFirstCommit] = []

    def consumer(self, topics: Sequence[str], *, group: str) -> Consumer:
        self.consumers.append(RefusesFirstCommit(self._inner.consumer(topics, group=group)))
        return self.consumers[-1]

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


async def test_a_refused_commit_is_not_a_commit_and_the_next_one_covers_it() -> None:
    bus = await _bus([b"a", b"b", b"c", b"d"])
    handler = Handler()
    rebalancing = RebalancingBus(bus)
    with structlog.testing.capture_logs() as logs:
        await _run_until(_subscriber(rebalancing, handler), 4)
    assert [e["event"] for e in logs if "commit" in e["event"]] == ["work_commit_failed"]
    assert handler.commits == [[b"c", b"d"]]  # the refused batch was never said committed
    assert await _lag(bus) == 0  # the later commit covers it: commits are cumulative


async def test_each_step_runs_with_the_records_log_context() -> None:
    bus = await _bus([b"a", b"b"])
    handler = Handler()
    await _run_until(_subscriber(bus, handler), 2)
    assert handler.contexts[0] == {
        "consumer_group": GROUP,
        "topic": TOPIC,
        "partition": 0,
        "offset": "0-1",
    }
    assert structlog.contextvars.get_contextvars() == {}  # unbound after the step
    one = Record(topic=TOPIC, partition=3, offset=7, value=b"", key=b"ev-1")
    assert log_context("g", [one]) == {
        "consumer_group": "g",
        "topic": TOPIC,
        "partition": 3,
        "offset": 7,
        "event_id": "ev-1",
    }


async def test_a_dead_letter_carries_its_failed_spans_context(spans: InMemorySpanExporter) -> None:
    bus = await _bus([b"bad"])
    subscriber = Subscriber(
        bus,
        Subscription(name="work", topics=(TOPIC,), group=GROUP, poll_timeout_s=0.01),
        Handler(poison=b"bad"),
        acks=AckPolicy(dead_letter_topic=DLQ),
        middlewares=[TracedDeadLetters("work.process", group=GROUP, messaging_system="memory")],
    )
    stop = asyncio.Event()
    running = asyncio.create_task(subscriber.run(stop))
    await _until_committed(bus)
    stop.set()
    await running
    (letter,) = await bus.read(DLQ, 0, offset=0, max_records=10)
    (span,) = spans.get_finished_spans()
    assert span.status.status_code is trace.StatusCode.ERROR
    assert (span.attributes or {})["cog.dlq.kind"] == "failed"
    carried = context_from_headers(letter.headers)
    assert carried is not None
    assert trace.get_current_span(carried).get_span_context().span_id == span.context.span_id


@dataclass
class FlakyFinish(Handler):
    """Counts its stages; its finish fails retryably ``finish_failures`` times first."""

    stages: int = 0
    finish_failures: int = 0
    finishes_of: list[int] = field(default_factory=list)  # id() of each staged batch met

    async def stage(self, records: Sequence[Record]) -> list[bytes]:
        self.stages += 1
        return await super().stage(records)

    async def finish(self, staged: list[bytes]) -> list[bytes]:
        self.finishes_of.append(id(staged))
        if self.finish_failures:
            self.finish_failures -= 1
            raise UnavailableError("index down")
        return await super().finish(staged)


async def test_a_batch_done_at_once_retries_its_finish_on_the_batch_it_staged() -> None:
    """``process`` (and a split batch) stage once: a retried finish keeps what it already did."""
    bus = await _bus([b"a", b"b"])
    handler = FlakyFinish(finish_failures=2)
    consumer = bus.consumer([TOPIC], group=GROUP)
    records = await consumer.poll(max_records=2, timeout_s=0.1)
    outcome = await _subscriber(bus, handler).process(records, consumer)
    await consumer.close()
    assert outcome == [b"a", b"b"]
    assert handler.stages == 1
    assert len(handler.finishes_of) == 3 and len(set(handler.finishes_of)) == 1
    assert await _lag(bus) == 0
