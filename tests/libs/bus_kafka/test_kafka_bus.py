"""KafkaEventBus on a real Kafka-protocol broker (noida-db, or KAFKA_BOOTSTRAP_SERVERS)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from cogsub.bus.kafka import KafkaConsumer, KafkaEventBus, KafkaSettings
from cogsub.bus.ports import Record
from cogsub.core import STAGE1_TOPICS, NotFoundError, TopicSpec, UnavailableError
from tests.fixtures.kafka import KafkaServerProcess

pytestmark = pytest.mark.connected


@pytest.fixture
async def bus(kafka_bootstrap: str) -> AsyncIterator[KafkaEventBus]:
    bus = KafkaEventBus(bootstrap_servers=kafka_bootstrap, client_id="cogsub-test")
    yield bus
    await bus.close()


@pytest.fixture
async def admin(kafka_bootstrap: str) -> AsyncIterator[AIOKafkaAdminClient]:
    """An admin client independent of the bus, to check what the broker really holds."""
    client = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await client.start()
    yield client
    await client.close()


async def poll_until(
    consumer: KafkaConsumer, count: int, *, within_s: float = 15.0
) -> list[Record]:
    """Poll until ``count`` records arrived (or the deadline passes), returning them all."""
    records: list[Record] = []
    deadline = time.monotonic() + within_s
    while len(records) < count and time.monotonic() < deadline:
        records += await consumer.poll(max_records=500, timeout_s=0.5)
    return records


def positions(records: Sequence[Record]) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in records)


async def test_idempotent_producer_gets_a_producer_id(bus: KafkaEventBus, unique_name: str) -> None:
    await bus.ensure_topics([TopicSpec(unique_name, 1)])
    await bus.publish(unique_name, b"v")
    # The broker hands out a producer id only to an idempotent producer.
    assert bus._producer._txn_manager is not None
    assert bus._producer._txn_manager.has_pid()


async def test_binary_headers_arrive_exactly_as_sent(bus: KafkaEventBus, unique_name: str) -> None:
    await bus.ensure_topics([TopicSpec(unique_name, 1)])
    headers = (
        ("binary", bytes(range(256))),
        ("empty", b""),
        ("dup", b"first"),
        ("dup", b"second"),
        ("utf8", "naïve ☃".encode()),
    )
    published = await bus.publish(unique_name, b"\x00\xff", key=b"\x01", headers=headers)
    consumer = bus.consumer([unique_name], group=unique_name)
    [record] = await poll_until(consumer, 1)
    await consumer.close()
    assert record.headers == headers
    assert record.header("dup") == b"second"
    assert (record.value, record.key) == (b"\x00\xff", b"\x01")
    assert (record.partition, record.offset) == (published.partition, published.offset)
    assert record.timestamp_ms > 0


async def test_ensure_topics_creates_the_exact_partition_counts(
    bus: KafkaEventBus, admin: AIOKafkaAdminClient, unique_name: str
) -> None:
    specs = [TopicSpec(f"{unique_name}.{s.name}", s.partitions) for s in STAGE1_TOPICS]
    await bus.ensure_topics(specs)
    await bus.ensure_topics(specs)  # a second run finds them all and changes nothing
    described = await admin.describe_topics([s.name for s in specs])
    counts = {t["topic"]: len(t["partitions"]) for t in described}
    assert counts == {s.name: s.partitions for s in specs}
    assert [s.partitions for s in specs] == [12, 3, 12, 6]
    stats = await bus.topic_stats(specs[0].name)
    assert [p.partition for p in stats.partitions] == list(range(12))


async def test_existing_topics_are_left_alone(
    bus: KafkaEventBus, admin: AIOKafkaAdminClient, unique_name: str
) -> None:
    await bus.ensure_topics([TopicSpec(unique_name, 2)])
    await bus.ensure_topics([TopicSpec(unique_name, 5), TopicSpec(f"{unique_name}.new", 3)])
    described = await admin.describe_topics([unique_name, f"{unique_name}.new"])
    assert {t["topic"]: len(t["partitions"]) for t in described} == {
        unique_name: 2,
        f"{unique_name}.new": 3,
    }


async def test_unknown_topics_raise_not_found_and_are_not_created(
    bus: KafkaEventBus, admin: AIOKafkaAdminClient, unique_name: str
) -> None:
    with pytest.raises(NotFoundError, match=unique_name):
        await bus.publish(unique_name, b"v")
    consumer = bus.consumer([unique_name], group=unique_name)
    with pytest.raises(NotFoundError):
        await consumer.poll(max_records=1, timeout_s=0.1)
    await consumer.close()
    with pytest.raises(NotFoundError):
        await bus.topic_stats(unique_name)
    # noida-db auto-creates topics named in metadata requests; the bus must never name them.
    assert unique_name not in await admin.list_topics()


async def test_a_new_consumer_resumes_after_the_commit(
    bus: KafkaEventBus, unique_name: str
) -> None:
    await bus.ensure_topics([TopicSpec(unique_name, 1)])
    for i in range(10):
        await bus.publish(unique_name, b"%d" % i)
    first = bus.consumer([unique_name], group=unique_name)
    seen = await poll_until(first, 10)
    assert [r.offset for r in seen] == list(range(10))
    await first.commit(seen[:6])
    await first.close()

    stats = await bus.topic_stats(unique_name, group=unique_name)
    assert [(p.end_offset, p.committed) for p in stats.partitions] == [(10, 6)]
    assert stats.lag == 4

    second = bus.consumer([unique_name], group=unique_name)
    again = await poll_until(second, 4)
    await second.close()
    assert [r.offset for r in again] == [6, 7, 8, 9]
    assert [r.value for r in again] == [b"6", b"7", b"8", b"9"]


async def test_commit_covers_each_partition_up_to_its_highest_record(
    bus: KafkaEventBus, unique_name: str
) -> None:
    await bus.ensure_topics([TopicSpec(unique_name, 3)])
    await asyncio.gather(*(bus.publish(unique_name, b"v", key=b"%d" % i) for i in range(30)))
    consumer = bus.consumer([unique_name], group=unique_name)
    records = await poll_until(consumer, 30)
    assert len(records) == 30
    by_partition: dict[int, list[Record]] = {}
    for record in records:
        by_partition.setdefault(record.partition, []).append(record)
    # Give only the second record of each partition: the commit must cover just up to it.
    await consumer.commit([rs[1] for rs in by_partition.values() if len(rs) > 1])
    await consumer.close()
    stats = await bus.topic_stats(unique_name, group=unique_name)
    expected = {p: (2 if len(rs) > 1 else None) for p, rs in by_partition.items()}
    committed = {p.partition: p.committed for p in stats.partitions if p.partition in expected}
    assert committed == expected
    assert sum(p.end_offset for p in stats.partitions) == 30


async def test_close_flushes_records_still_lingering(
    kafka_bootstrap: str, unique_name: str
) -> None:
    settings = KafkaSettings(linger_ms=1_500)
    bus = KafkaEventBus(bootstrap_servers=kafka_bootstrap, settings=settings)
    await bus.ensure_topics([TopicSpec(unique_name, 2)])
    publishes = [asyncio.create_task(bus.publish(unique_name, b"%d" % i)) for i in range(50)]
    done, _ = await asyncio.wait(publishes, timeout=0.3)
    assert not done  # still lingering in the producer's batches
    await bus.close()
    assert all(task.done() for task in publishes)  # close returned only after delivery
    published = [task.result() for task in publishes]

    reader = KafkaEventBus(bootstrap_servers=kafka_bootstrap)
    consumer = reader.consumer([unique_name], group=unique_name)
    records = await poll_until(consumer, 50)
    await consumer.close()
    await reader.close()
    assert positions(records) == sorted((p.partition, p.offset) for p in published)


async def test_a_restarted_broker_keeps_records_and_the_bus_reconnects(
    noida_kafka_server: KafkaServerProcess, unique_name: str
) -> None:
    bus = KafkaEventBus(bootstrap_servers=noida_kafka_server.bootstrap)
    try:
        await bus.ensure_topics([TopicSpec(unique_name, 2)])
        before = [await bus.publish(unique_name, b"before-%d" % i) for i in range(5)]
        noida_kafka_server.restart()
        after = await bus.publish(unique_name, b"after")
        consumer = bus.consumer([unique_name], group=unique_name)
        records = await poll_until(consumer, 6)
        await consumer.close()
    finally:
        await bus.close()
    assert positions(records) == sorted((p.partition, p.offset) for p in [*before, after])
    expected = sorted([b"after"] + [b"before-%d" % i for i in range(5)])
    assert sorted(r.value for r in records) == expected


@pytest.mark.slow
async def test_publishing_while_the_broker_is_down_is_unavailable_and_close_ends(
    noida_kafka_server: KafkaServerProcess, unique_name: str
) -> None:
    settings = KafkaSettings(request_timeout_ms=2_000, delivery_timeout_ms=2_000)
    bus = KafkaEventBus(bootstrap_servers=noida_kafka_server.bootstrap, settings=settings)
    try:
        await bus.ensure_topics([TopicSpec(unique_name, 1)])
        await bus.publish(unique_name, b"up")
        noida_kafka_server.stop()
        with pytest.raises(UnavailableError):
            await bus.publish(unique_name, b"down")
    finally:
        started = time.monotonic()
        await bus.close()  # the unsent record must not keep close waiting forever
    assert time.monotonic() - started < 10


@pytest.mark.slow
async def test_ten_thousand_concurrent_publishes_are_all_acknowledged(
    bus: KafkaEventBus, unique_name: str
) -> None:
    await bus.ensure_topics([TopicSpec(unique_name, 12)])
    await bus.publish(unique_name, b"warm-up")
    value = b"x" * 1024
    started = time.perf_counter()
    published = await asyncio.gather(
        *(bus.publish(unique_name, value, key=b"%d" % i) for i in range(10_000))
    )
    elapsed = time.perf_counter() - started
    print(f"\nkafka produce rate: {10_000 / elapsed:.0f} records/s (1 KB, acks=all, idempotent)")
    assert len({(p.partition, p.offset) for p in published}) == 10_000
    stats = await bus.topic_stats(unique_name)
    assert stats.end_offset == 10_001
    # Offsets per partition are dense: nothing lost, nothing written twice.
    for part in stats.partitions:
        offsets = sorted(p.offset for p in published if p.partition == part.partition)
        assert offsets == list(range(part.end_offset - len(offsets), part.end_offset))
