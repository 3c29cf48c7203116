"""The watch feeds new dead letters of experience.raw into the book, over a real bus."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from cogsub.bus.memory import InMemoryEventBus
from cogsub.core.topics import EXPERIENCE_RAW_DLQ as DLQ
from cogsub.core.topics import STAGE1_TOPICS
from cogsub.deadletters.letters import RejectionBook
from cogsub.deadletters.watch import DeadLetterWatch
from cogsub.ingestion.pipeline import DLQ_KIND_HEADER

OLD = b'{"eventId": "old", "bankId": "alice"}'
NEW = b'{"eventId": "new", "bankId": "alice"}'
HEADERS = {DLQ_KIND_HEADER: b"invalid"}


@pytest.fixture
async def bus() -> AsyncIterator[InMemoryEventBus]:
    bus = InMemoryEventBus()
    await bus.ensure_topics(STAGE1_TOPICS)
    yield bus
    await bus.close()


async def test_it_starts_at_the_end_and_notes_what_comes_after(bus: InMemoryEventBus) -> None:
    await bus.publish(DLQ, OLD, key=b"old", headers=HEADERS)
    book = RejectionBook()
    watch = DeadLetterWatch(bus=bus, book=book)
    await watch.start()
    await bus.publish(DLQ, NEW, key=b"new", headers=HEADERS)
    await bus.publish(DLQ, NEW, key=b"other-partition", headers=HEADERS)
    assert await watch.read_once() == 2
    assert await watch.read_once() == 0
    assert book.rejection_for("alice", "new", NEW) is not None
    assert book.rejection_for("alice", "old", OLD) is None  # answered before this process


async def test_a_waiting_retain_wakes_an_idle_watch(bus: InMemoryEventBus) -> None:
    book = RejectionBook()
    watch = DeadLetterWatch(bus=bus, book=book, idle_interval_s=60.0)
    await watch.start()
    stop = asyncio.Event()
    running = asyncio.create_task(watch.run(stop))
    try:
        await asyncio.sleep(0.05)  # the watch is in its long idle pause now
        await bus.publish(DLQ, NEW, key=b"new", headers=HEADERS)
        started = time.monotonic()
        while book.rejection_for("alice", "new", NEW) is None:
            assert time.monotonic() - started < 5.0, "the idle watch never woke"
            await asyncio.sleep(0.01)
    finally:
        stop.set()
        await asyncio.wait_for(running, timeout=5.0)


async def test_a_topic_made_after_the_start_is_followed_from_its_first_letter() -> None:
    bus = InMemoryEventBus()  # no topics yet: the watch starts with nothing to follow
    try:
        book = RejectionBook()
        watch = DeadLetterWatch(bus=bus, book=book)
        await watch.start()
        assert await watch.read_once() == 0
        await bus.ensure_topics(STAGE1_TOPICS)
        await bus.publish(DLQ, NEW, key=b"new", headers=HEADERS)
        assert await watch.read_once() == 1
        assert book.rejection_for("alice", "new", NEW) is not None
    finally:
        await bus.close()
