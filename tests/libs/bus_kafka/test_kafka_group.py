"""Group membership repairs of the Kafka adapter (``cogsub.bus.kafka.group_repairs``), live.

On noida-db, a commit that races a rebalance used to leave the member's old id in
the group for good and the group stuck in ``CompletingRebalance``; that is what
timed out the fault tests now and then.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from cogsub.bus.kafka import KafkaConsumer, KafkaEventBus
from cogsub.core import TopicSpec, UnavailableError

pytestmark = [pytest.mark.connected, pytest.mark.timeout(90)]

PARTITIONS = 4


@pytest.fixture
async def bus(kafka_bootstrap: str) -> AsyncIterator[KafkaEventBus]:
    bus = KafkaEventBus(bootstrap_servers=kafka_bootstrap, client_id="cogsub-group-test")
    yield bus
    await bus.close()


async def group_members(bootstrap: str, group: str) -> tuple[str, list[str]]:
    """The group's state and member ids, as the broker reports them."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        described = await admin.describe_consumer_groups([group])
    finally:
        await admin.close()
    _error, _name, state, _type, _protocol, members = described[0].groups[0]
    return state, [member[0] for member in members]


async def filled_topic(bus: KafkaEventBus, topic: str) -> None:
    await bus.ensure_topics([TopicSpec(topic, PARTITIONS)])
    await asyncio.gather(*(bus.publish(topic, b"r%d" % i, key=b"k%d" % i) for i in range(40)))


async def poll_quietly(consumer: KafkaConsumer) -> None:
    with contextlib.suppress(UnavailableError):  # the group moved; the next poll rejoins
        await consumer.poll(max_records=100, timeout_s=0.5)


async def settle(
    bootstrap: str, group: str, consumers: list[KafkaConsumer], within_s: float
) -> str:
    """Poll every member until the group is stable with exactly them, all partitions owned."""
    deadline = time.monotonic() + within_s
    seen = ""
    while time.monotonic() < deadline:
        await asyncio.gather(*(poll_quietly(c) for c in consumers))
        state, members = await group_members(bootstrap, group)
        owned = set().union(*(c.assigned_partitions() for c in consumers))
        seen = f"{state} with {len(members)} members, {len(owned)} partitions owned"
        if state == "Stable" and len(members) == len(consumers) and len(owned) == PARTITIONS:
            return seen
    raise AssertionError(f"the group did not settle in {within_s} s: {seen}")


async def test_a_commit_racing_a_join_leaves_no_member_behind(
    bus: KafkaEventBus, kafka_bootstrap: str, unique_name: str
) -> None:
    await filled_topic(bus, unique_name)
    first = bus.consumer([unique_name], group=unique_name)
    records = await first.poll(max_records=100, timeout_s=5.0)
    assert records
    second = bus.consumer([unique_name], group=unique_name)
    joining = asyncio.create_task(second.poll(max_records=100, timeout_s=0.5))
    failed = 0
    # Commit with the old generation while the second member joins: aiokafka drops
    # the first member's id and rejoins under a new one.
    for record in records:
        try:
            await first.commit([record])
        except UnavailableError:
            failed += 1
            break
        await asyncio.sleep(0.05)
    await asyncio.gather(joining, return_exceptions=True)
    assert failed, "no commit raced the rebalance; the test proved nothing"
    await settle(kafka_bootstrap, unique_name, [first, second], within_s=30)
    await first.close()
    await second.close()


async def test_a_member_whose_coordination_died_is_replaced(
    bus: KafkaEventBus, kafka_bootstrap: str, unique_name: str
) -> None:
    await filled_topic(bus, unique_name)
    consumer = bus.consumer([unique_name], group=unique_name)
    assert await consumer.poll(max_records=100, timeout_s=5.0)
    stranded: Any = consumer._consumer
    _state, [old_member] = await group_members(kafka_bootstrap, unique_name)

    # What noida-db once did: a SyncGroup answer aiokafka cannot decode ends its
    # coordination task, and every later getmany re-raises that error.
    async def undecodable(*_args: object, **_kwargs: object) -> None:
        raise ValueError("unpack requires a buffer of 2 bytes")

    stranded._coordinator._on_join_complete = undecodable
    stranded._coordinator.request_rejoin()
    deadline = time.monotonic() + 15
    with pytest.raises(UnavailableError, match="coordination failed"):
        while time.monotonic() < deadline:
            await consumer.poll(max_records=100, timeout_s=0.5)
    assert consumer._consumer is None

    records = []
    while not records and time.monotonic() < deadline + 15:
        records = await consumer.poll(max_records=100, timeout_s=0.5)
    assert records, "the replacement member read nothing"
    assert consumer._consumer is not stranded
    state, members = await group_members(kafka_bootstrap, unique_name)
    assert old_member not in members and len(members) == 1, (state, members)
    await consumer.close()
