"""InMemoryEventBus behaviour beyond the contract: one consumer per group, closed buses."""

from __future__ import annotations

from collections import Counter

import pytest

from cogsub.bus.memory import InMemoryBusState, InMemoryEventBus
from cogsub.core.errors import ConfigurationError, NotFoundError, UnavailableError
from cogsub.core.topics import TopicSpec


async def test_a_second_live_consumer_of_a_group_is_refused() -> None:
    state = InMemoryBusState()
    bus, other = InMemoryEventBus(state=state), InMemoryEventBus(state=state)
    await bus.ensure_topics([TopicSpec("t", 2)])
    first = bus.consumer(["t"], group="g")
    second = other.consumer(["t"], group="g")
    assert await first.poll(max_records=1, timeout_s=0) == []
    with pytest.raises(ConfigurationError):
        await second.poll(max_records=1, timeout_s=0)
    await first.close()
    assert await second.poll(max_records=1, timeout_s=0) == []
    await second.close()


async def test_poll_is_fair_across_partitions() -> None:
    bus = InMemoryEventBus()
    await bus.ensure_topics([TopicSpec("t", 3)])
    for _ in range(90):
        await bus.publish("t", b"x")
    consumer = bus.consumer(["t"], group="g")
    records = await consumer.poll(max_records=30, timeout_s=0)
    assert Counter(r.partition for r in records) == {0: 10, 1: 10, 2: 10}
    await consumer.close()


async def test_unknown_topics_and_closed_buses() -> None:
    bus = InMemoryEventBus()
    consumer = bus.consumer(["missing"], group="g")
    with pytest.raises(NotFoundError):
        await consumer.poll(max_records=1, timeout_s=0)
    with pytest.raises(NotFoundError):
        await bus.topic_stats("missing")
    await consumer.close()
    await bus.close()
    with pytest.raises(UnavailableError):
        await bus.publish("missing", b"x")


async def test_publish_many_appends_in_order_all_or_nothing() -> None:
    bus = InMemoryEventBus()
    await bus.ensure_topics([TopicSpec("t", 1), TopicSpec("u", 2)])
    published = await bus.publish_many(
        [("t", b"a", None, None), ("u", b"b", b"k", (("h", b"1"),)), ("t", b"c", None, None)]
    )
    assert [(p.topic, p.offset) for p in published] == [("t", 0), ("u", 0), ("t", 1)]
    with pytest.raises(NotFoundError):
        await bus.publish_many([("t", b"d", None, None), ("missing", b"e", None, None)])
    assert (await bus.topic_stats("t")).end_offset == 2
    consumer = bus.consumer(["u"], group="g")
    (record,) = await consumer.poll(max_records=5, timeout_s=0)
    assert (record.value, record.key, record.headers) == (b"b", b"k", (("h", b"1"),))
    await consumer.close()
