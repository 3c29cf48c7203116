"""The ingestion worker on the durable embedded stack: happy path, redelivery,
poison, conflicting duplicates, and a crash between every pair of steps."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from cogsub.core import (
    EXPERIENCE_ENRICHED,
    EXPERIENCE_RAW,
    ArchivedEvent,
)
from cogsub.ingestion import BatchOutcome, Stage
from cogsub.ingestion.pipeline import DLQ_KIND_HEADER, DLQ_REASON_HEADER, DLQ_SOURCE_HEADER
from tests.services.ingestion.harness import Harness, event_body

POISON = [b"{not json", json.dumps({"eventId": "../etc/passwd", "type": "x"}).encode()]


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    h = Harness(tmp_path)
    yield h
    await h.close()


async def test_happy_path_archives_indexes_and_announces(harness: Harness) -> None:
    await harness.publish([event_body(i) for i in range(20)])
    bus = harness.bus()
    await harness.drain(harness.worker(bus=bus), bus)

    keys = await harness.archived_keys()
    assert len(keys) == 20
    archived = ArchivedEvent.model_validate_json((harness.root / "archive" / keys[0]).read_bytes())
    assert archived.action is not None and archived.action.reasoning.startswith("secret reasoning")
    assert len(archived.input.embedding) == 8 and archived.object_storage_key == keys[0]
    assert await harness.indexed_ids() == 20
    assert await harness.announced() == {f"ev-{i:05d}" for i in range(20)}
    enriched = [json.loads(r.value) for r in await harness.read_topic(EXPERIENCE_ENRICHED)]
    assert {e["embeddingDimension"] for e in enriched} == {8}
    assert await harness.dead_letters() == []


async def test_index_never_holds_reasoning_or_tool_output(harness: Harness) -> None:
    await harness.publish([event_body(1)])
    bus = harness.bus()
    await harness.drain(harness.worker(bus=bus), bus)
    doc = await harness.index().get("bank-a", "ev-00001")
    assert doc is not None
    source = json.dumps(doc.to_source())
    assert "secret reasoning" not in source and "tool output" not in source
    assert doc.object_storage_key == "events/2026/05/02/banks/bank-a/ev-00001.json"


async def test_redelivery_of_processed_events_is_a_no_op(harness: Harness) -> None:
    bodies = [event_body(i) for i in range(10)]
    await harness.publish(bodies)
    bus = harness.bus()
    await harness.drain(harness.worker(bus=bus), bus)
    before = {k: (harness.root / "archive" / k).read_bytes() for k in await harness.archived_keys()}

    await harness.publish(bodies)  # the producer retried everything
    await harness.drain(harness.worker(bus=bus), bus)

    after = {k: (harness.root / "archive" / k).read_bytes() for k in await harness.archived_keys()}
    assert after == before
    assert await harness.indexed_ids() == 10
    assert await harness.dead_letters() == []


async def test_poison_messages_go_to_the_dlq_and_never_block(harness: Harness) -> None:
    await harness.publish([event_body(0), POISON[0], event_body(1), POISON[1], event_body(2)])
    bus = harness.bus()
    await harness.drain(harness.worker(bus=bus), bus)

    assert await harness.indexed_ids() == 3
    dead = await harness.dead_letters()
    assert [d.value for d in dead] == POISON
    assert dead[0].header(DLQ_KIND_HEADER) == b"invalid"
    assert (dead[0].header(DLQ_REASON_HEADER) or b"").startswith(b"(event): must be JSON")
    assert b"eventId: must start with" in (dead[1].header(DLQ_REASON_HEADER) or b"")
    assert dead[1].header(DLQ_SOURCE_HEADER) == f"{EXPERIENCE_RAW}/0/3".encode() or (
        (dead[1].header(DLQ_SOURCE_HEADER) or b"").startswith(EXPERIENCE_RAW.encode())
    )
    assert (await bus.topic_stats(EXPERIENCE_RAW, group="ingestion")).lag == 0


async def test_same_id_with_different_content_is_refused_not_overwritten(harness: Harness) -> None:
    original = event_body(7)
    impostor = event_body(7, text="a rewritten history")
    await harness.publish([original])
    bus = harness.bus()
    await harness.drain(harness.worker(bus=bus), bus)
    await harness.publish([impostor])
    await harness.drain(harness.worker(bus=bus), bus)

    (key,) = await harness.archived_keys()
    stored = json.loads((harness.root / "archive" / key).read_text())
    assert stored["input"]["text"] == original["input"]["text"]
    (dead,) = await harness.dead_letters()
    assert dead.header(DLQ_KIND_HEADER) == b"conflict"
    assert json.loads(dead.value)["input"]["text"] == "a rewritten history"


async def test_conflicting_duplicates_within_one_batch(harness: Harness) -> None:
    await harness.publish([event_body(3), event_body(3), event_body(3, text="other")])
    bus = harness.bus()
    await harness.drain(harness.worker(bus=bus), bus)
    assert len(await harness.archived_keys()) == 1
    assert [d.header(DLQ_KIND_HEADER) for d in await harness.dead_letters()] == [b"conflict"]


class SimulatedCrash(BaseException):
    """Stands for the process dying: nothing in the worker may catch it."""


def crash_at(stage: Stage):  # type: ignore[no-untyped-def]
    def observe(seen: Stage, ids: Sequence[str]) -> None:
        if seen is stage:
            raise SimulatedCrash(stage)

    return observe


@pytest.mark.parametrize(
    "stage",
    [
        Stage.RECEIVE,
        Stage.EMBED,
        Stage.SCORE,
        Stage.KEY,
        Stage.ARCHIVE,
        Stage.INDEX,
        Stage.EMIT,
        Stage.COMMIT,
    ],
)
async def test_crash_after_any_stage_recovers_on_restart(harness: Harness, stage: Stage) -> None:
    bodies = [event_body(i) for i in range(12)]
    await harness.publish([*bodies[:5], POISON[0], *bodies[5:], POISON[1]])
    bus = harness.bus()
    with pytest.raises(SimulatedCrash):
        await harness.drain(harness.worker(bus=bus, observer=crash_at(stage)), bus)
    await harness.close()  # the process is gone; a new one opens everything again

    bus = harness.bus()
    await harness.drain(harness.worker(bus=bus), bus)

    keys = await harness.archived_keys()
    assert len(keys) == 12 == len(set(keys))
    assert await harness.indexed_ids() == 12
    assert await harness.announced() == {f"ev-{i:05d}" for i in range(12)}
    dead_sources = {d.header(DLQ_SOURCE_HEADER) for d in await harness.dead_letters()}
    assert len(dead_sources) == 2  # at-least-once: a poison record may be dead-lettered twice
    assert {d.value for d in await harness.dead_letters()} == set(POISON)


class CrashingBus:
    """Delegates to a real bus and dies after ``allowed`` publishes to a topic."""

    def __init__(self, bus, topic: str, allowed: int) -> None:  # type: ignore[no-untyped-def]
        self._bus, self._topic, self._allowed = bus, topic, allowed

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._bus, name)

    async def publish(self, topic: str, value: bytes, **kwargs):  # type: ignore[no-untyped-def]
        if topic == self._topic:
            if self._allowed == 0:
                raise SimulatedCrash(topic)
            self._allowed -= 1
        return await self._bus.publish(topic, value, **kwargs)

    async def publish_many(self, records):  # type: ignore[no-untyped-def]
        # Record by record, so the crash can fall between two records of one batch.
        return [await self.publish(t, v, key=k, headers=h) for t, v, k, h in records]


@pytest.mark.parametrize("topic", [EXPERIENCE_ENRICHED, "memory.indexed"])
async def test_crash_between_the_two_announcements_recovers(harness: Harness, topic: str) -> None:
    await harness.publish([event_body(i) for i in range(6)])
    bus = harness.bus()
    crashing = CrashingBus(bus, topic, allowed=2)
    with pytest.raises(SimulatedCrash):
        await harness.drain(harness.worker(bus=crashing), bus)
    await harness.close()

    bus = harness.bus()
    await harness.drain(harness.worker(bus=bus), bus)
    assert len(await harness.archived_keys()) == 6
    assert await harness.indexed_ids() == 6
    assert await harness.announced() == {f"ev-{i:05d}" for i in range(6)}


class FlakyArchive:
    """A real archive that is unavailable for the first ``failures`` puts."""

    def __init__(self, archive, failures: int) -> None:  # type: ignore[no-untyped-def]
        self._archive, self.failures = archive, failures

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._archive, name)

    async def put_once(self, key: str, body: bytes, **kwargs) -> None:  # type: ignore[no-untyped-def]
        from cogsub.core import UnavailableError

        if self.failures > 0:
            self.failures -= 1
            raise UnavailableError("archive briefly unavailable")
        await self._archive.put_once(key, body, **kwargs)


async def test_retryable_failures_are_retried_not_dead_lettered(harness: Harness) -> None:
    from cogsub.ingestion import RetryPolicy

    await harness.publish([event_body(i) for i in range(4)])
    bus = harness.bus()
    flakies: list[FlakyArchive] = []

    def wrap(archive):  # type: ignore[no-untyped-def]
        flakies.append(FlakyArchive(archive, failures=5))
        return flakies[-1]

    worker = harness.worker(bus=bus, wrap_archive=wrap, retry=RetryPolicy(0.001, 0.01))
    await harness.drain(worker, bus)
    (flaky,) = flakies
    assert flaky.failures == 0
    assert len(await harness.archived_keys()) == 4
    assert await harness.dead_letters() == []


async def test_run_embeds_ahead_and_a_stop_leaves_nothing_half_done(harness: Harness) -> None:

    await harness.publish([event_body(i) for i in range(40)])
    bus = harness.bus()
    worker = harness.worker(bus=bus)
    await worker.prepare()
    stop = asyncio.Event()
    seen: list[int] = []

    def after_batch(outcome: BatchOutcome) -> None:
        seen.append(len(outcome.indexed))
        if sum(seen) >= 16:
            stop.set()  # a further batch is already polled and embedded ahead by now

    await asyncio.wait_for(worker.run(stop, on_batch=after_batch), timeout=20)
    stats = await bus.topic_stats(EXPERIENCE_RAW, group="ingestion")
    assert stats.lag == 40 - sum(seen)  # only what was processed is committed
    assert await harness.indexed_ids() == sum(seen)

    await harness.drain(harness.worker(bus=bus), bus)  # the rest is delivered again
    assert await harness.indexed_ids() == 40
    assert len(await harness.archived_keys()) == 40


@pytest.mark.parametrize(
    "stage", [Stage.EMBED, Stage.ARCHIVE, Stage.INDEX, Stage.EMIT, Stage.COMMIT]
)
async def test_crash_in_the_pipelined_run_recovers_on_restart(
    harness: Harness, stage: Stage
) -> None:
    bodies = [event_body(i) for i in range(30)]
    await harness.publish([*bodies[:10], POISON[0], *bodies[10:], POISON[1]])
    bus = harness.bus()
    crashes = {"left": 2}  # let a batch or two through first, so batches are in flight

    def observe(seen: Stage, ids: Sequence[str]) -> None:
        if seen is stage:
            crashes["left"] -= 1
            if crashes["left"] == 0:
                raise SimulatedCrash(stage)

    worker = harness.worker(bus=bus, observer=observe)
    await worker.prepare()
    with pytest.raises(SimulatedCrash):
        await asyncio.wait_for(worker.run(asyncio.Event()), timeout=20)
    await harness.close()

    bus = harness.bus()
    await harness.drain(harness.worker(bus=bus), bus)
    keys = await harness.archived_keys()
    assert len(keys) == 30 == len(set(keys))
    assert await harness.indexed_ids() == 30
    assert await harness.announced() == {f"ev-{i:05d}" for i in range(30)}
    assert {d.value for d in await harness.dead_letters()} == set(POISON)


class _FirstWriteHeld:
    """An index whose first upsert waits until the test lets it through."""

    def __init__(self, index: Any) -> None:
        self._index = index
        self.release = asyncio.Event()
        self.first_started = asyncio.Event()
        self._calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)

    async def upsert(self, docs: Sequence[Any]) -> None:
        self._calls += 1
        if self._calls == 1:
            self.first_started.set()
            await self.release.wait()
        await self._index.upsert(docs)


async def test_batches_finish_side_by_side_but_commit_in_order(harness: Harness) -> None:
    await harness.publish([event_body(i) for i in range(24)])  # three batches of 8
    bus = harness.bus()
    held: list[_FirstWriteHeld] = []

    def wrap(index: Any) -> _FirstWriteHeld:
        held.append(_FirstWriteHeld(index))
        return held[-1]

    seen: list[tuple[Stage, str]] = []
    indexed = asyncio.Event()

    def observe(stage: Stage, ids: Sequence[str]) -> None:
        if stage in (Stage.INDEX, Stage.COMMIT) and ids:
            seen.append((stage, ids[0]))
            indexed.set()

    worker = harness.worker(bus=bus, wrap_index=wrap, observer=observe, finishing_depth=2)
    await worker.prepare()
    stop = asyncio.Event()
    outcomes: list[BatchOutcome] = []

    def after_batch(outcome: BatchOutcome) -> None:
        outcomes.append(outcome)
        if sum(len(o.indexed) for o in outcomes) >= 24:
            stop.set()

    running = asyncio.create_task(worker.run(stop, on_batch=after_batch))
    (index,) = held
    await asyncio.wait_for(index.first_started.wait(), timeout=10)

    # The second batch is indexed while the first is held, but it may not commit.
    await asyncio.wait_for(indexed.wait(), timeout=10)
    assert [stage for stage, _ in seen] == [Stage.INDEX]
    assert (await bus.topic_stats(EXPERIENCE_RAW, group="ingestion")).lag == 24
    index.release.set()
    await asyncio.wait_for(running, timeout=20)

    firsts = [o.indexed[0].event_id for o in outcomes]
    assert len(firsts) == 3
    second = seen[0][1]  # indexed first, though it was polled second
    assert second == firsts[1]
    assert [first for stage, first in seen if stage is Stage.COMMIT] == firsts
    assert (await bus.topic_stats(EXPERIENCE_RAW, group="ingestion")).lag == 0


async def test_run_reports_the_last_batch_without_waiting_for_more(harness: Harness) -> None:
    await harness.publish([event_body(i) for i in range(5)])  # fewer than one batch
    bus = harness.bus()
    worker = harness.worker(bus=bus)
    await worker.prepare()
    stop = asyncio.Event()
    seen: list[int] = []

    def after_batch(outcome: BatchOutcome) -> None:
        seen.append(len(outcome.indexed))
        stop.set()

    await asyncio.wait_for(worker.run(stop, on_batch=after_batch), timeout=10)
    assert seen == [5]
    assert (await bus.topic_stats(EXPERIENCE_RAW, group="ingestion")).lag == 0


async def test_stop_is_honoured_while_a_backend_stays_down(harness: Harness) -> None:
    from cogsub.core import UnavailableError
    from cogsub.ingestion import RetryPolicy

    class DownArchive:
        def __init__(self, archive):  # type: ignore[no-untyped-def]
            self._archive = archive

        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(self._archive, name)

        async def put_once(self, key: str, body: bytes, **kwargs) -> None:  # type: ignore[no-untyped-def]
            raise UnavailableError("archive down")

    await harness.publish([event_body(i) for i in range(4)])
    bus = harness.bus()
    worker = harness.worker(bus=bus, wrap_archive=DownArchive, retry=RetryPolicy(0.01, 0.05))
    await worker.prepare()
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    await asyncio.sleep(0.3)  # it is retrying by now
    stop.set()
    await asyncio.wait_for(running, timeout=5)  # returns instead of retrying forever
    assert (await bus.topic_stats(EXPERIENCE_RAW, group="ingestion")).lag == 4  # nothing committed
    assert await harness.dead_letters() == []


class BatchCrashingBus:
    """A real bus whose batch publish appends the first ``allowed`` records, then dies."""

    def __init__(self, bus, allowed: int) -> None:  # type: ignore[no-untyped-def]
        self._bus, self._allowed = bus, allowed
        self.batch_calls = 0

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._bus, name)

    async def publish_many(self, records):  # type: ignore[no-untyped-def]
        self.batch_calls += 1
        await self._bus.publish_many(records[: self._allowed])
        if len(records) > self._allowed:
            raise SimulatedCrash("mid-batch")
        self._allowed -= len(records)


@pytest.mark.parametrize("allowed", [0, 1, 5])
async def test_crash_part_way_through_a_batch_publish_recovers(
    harness: Harness, allowed: int
) -> None:
    await harness.publish([event_body(i) for i in range(6)])
    bus = harness.bus()
    crashing = BatchCrashingBus(bus, allowed=allowed)
    with pytest.raises(SimulatedCrash):
        await harness.drain(harness.worker(bus=crashing), bus)
    assert crashing.batch_calls == 1  # the batch's announcements went out in one call
    await harness.close()

    bus = harness.bus()
    await harness.drain(harness.worker(bus=bus), bus)
    assert len(await harness.archived_keys()) == 6
    assert await harness.indexed_ids() == 6
    assert await harness.announced() == {f"ev-{i:05d}" for i in range(6)}


class BatchFlakyArchive:
    """A real archive whose batch put is unavailable for its first ``failures`` calls."""

    def __init__(self, archive, failures: int) -> None:  # type: ignore[no-untyped-def]
        self._archive, self.failures = archive, failures
        self.batch_calls = 0

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._archive, name)

    async def put_once(self, key: str, body: bytes, **kwargs) -> None:  # type: ignore[no-untyped-def]
        raise AssertionError("a batch-capable archive is written one batch at a time")

    async def put_once_many(self, items):  # type: ignore[no-untyped-def]
        from cogsub.core import UnavailableError

        self.batch_calls += 1
        if self.failures > 0:
            self.failures -= 1
            raise UnavailableError("archive briefly unavailable")
        return await self._archive.put_once_many(items)


async def test_batch_archive_failures_are_retried_and_every_batch_is_one_call(
    harness: Harness,
) -> None:
    from cogsub.ingestion import RetryPolicy

    await harness.publish([event_body(i) for i in range(16)])
    bus = harness.bus()
    flakies: list[BatchFlakyArchive] = []

    def wrap(archive):  # type: ignore[no-untyped-def]
        flakies.append(BatchFlakyArchive(archive, failures=3))
        return flakies[-1]

    worker = harness.worker(bus=bus, wrap_archive=wrap, retry=RetryPolicy(0.001, 0.01))
    await harness.drain(worker, bus)
    (flaky,) = flakies
    assert flaky.failures == 0
    assert flaky.batch_calls == 3 + 16 // harness.batch_size
    assert len(await harness.archived_keys()) == 16
    assert await harness.announced() == {f"ev-{i:05d}" for i in range(16)}
    assert await harness.dead_letters() == []
