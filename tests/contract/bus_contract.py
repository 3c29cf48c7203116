"""The EventBus contract, written once and run against every adapter.

A concrete test class inherits ``EventBusContract`` and provides a ``bus_factory``
fixture: a zero-argument callable returning a NEW bus over the same durable
backend each time, so a test can close one bus and "restart" on another.
Capability and timing differences between adapters are class attributes.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Sequence

import pytest

from cogsub.bus.ports import Consumer, EventBus, Published, Record
from cogsub.core.errors import InvalidInputError, NotFoundError
from cogsub.core.topics import TopicSpec

BusFactory = Callable[[], EventBus]


class BusSession:
    """Opens buses and consumers for one test and closes whatever is still open."""

    def __init__(self, factory: BusFactory) -> None:
        self._factory = factory
        self._buses: list[EventBus] = []
        self._consumers: list[Consumer] = []

    def bus(self) -> EventBus:
        bus = self._factory()
        self._buses.append(bus)
        return bus

    def consumer(self, bus: EventBus, topics: Sequence[str], group: str) -> Consumer:
        consumer = bus.consumer(topics, group=group)
        self._consumers.append(consumer)
        return consumer

    async def close_consumer(self, consumer: Consumer) -> None:
        self._consumers.remove(consumer)
        await consumer.close()

    async def close_bus(self, bus: EventBus) -> None:
        self._buses.remove(bus)
        await bus.close()

    async def close_all(self) -> None:
        for consumer in reversed(self._consumers):
            await consumer.close()
        for bus in reversed(self._buses):
            await bus.close()
        self._consumers.clear()
        self._buses.clear()


class EventBusContract:
    """Behaviour every EventBus adapter keeps (see ``cogsub.bus.ports``)."""

    partitions = 3
    # How long to wait for records that are known to be there (returns as soon as they are).
    consume_timeout_s = 10.0
    # How much longer than asked an empty poll may take (group joins, network round trips).
    poll_slack_s = 1.0
    concurrent_publishes = 1000
    # How long to keep listening for records beyond the expected ones.
    extra_records_timeout_s = 0.2

    @pytest.fixture
    async def session(self, bus_factory: BusFactory) -> AsyncIterator[BusSession]:
        session = BusSession(bus_factory)
        try:
            yield session
        finally:
            await session.close_all()

    @pytest.fixture
    def topic(self, unique_name: str) -> str:
        return f"{unique_name}-topic"

    @pytest.fixture
    def group(self, unique_name: str) -> str:
        return f"{unique_name}-group"

    async def _bus_with_topic(self, session: BusSession, topic: str) -> EventBus:
        bus = session.bus()
        await bus.ensure_topics([TopicSpec(topic, self.partitions)])
        return bus

    async def _consume(self, consumer: Consumer, count: int) -> list[Record]:
        """Exactly ``count`` records: fails if they do not arrive or more arrive."""
        records: list[Record] = []
        deadline = time.monotonic() + self.consume_timeout_s
        while len(records) < count and time.monotonic() < deadline:
            records += await consumer.poll(max_records=count - len(records), timeout_s=0.5)
        assert len(records) == count, f"got {len(records)} of {count} records"
        assert await consumer.poll(max_records=10, timeout_s=self.extra_records_timeout_s) == []
        return records

    async def test_publish_then_consume_in_order_per_partition(
        self, session: BusSession, topic: str, group: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        published: dict[bytes, Published] = {}
        before_ms = time.time() * 1000
        for i in range(30):
            value = f"v{i}".encode()
            published[value] = await bus.publish(topic, value, key=f"k{i % 7}".encode())
        records = await self._consume(session.consumer(bus, [topic], group), 30)

        by_partition: dict[int, list[Record]] = defaultdict(list)
        for record in records:
            assert record.topic == topic
            where = published[record.value]
            assert (record.partition, record.offset) == (where.partition, where.offset)
            assert before_ms - 60_000 < record.timestamp_ms < time.time() * 1000 + 60_000
            by_partition[record.partition].append(record)
        for in_partition in by_partition.values():
            offsets = [r.offset for r in in_partition]
            assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
            # Within a partition, records come back in publish order.
            order = [int(r.value[1:]) for r in in_partition]
            assert order == sorted(order)

    async def test_publish_many_appends_in_order_with_keys_and_headers(
        self, session: BusSession, topic: str, group: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        records = [
            (topic, f"v{i}".encode(), f"k{i % 3}".encode(), (("n", str(i).encode()),))
            for i in range(60)
        ]
        published = await bus.publish_many(records)
        assert [p.topic for p in published] == [topic] * 60
        consumed = await self._consume(session.consumer(bus, [topic], group), 60)

        by_value = {r.value: r for r in consumed}
        for (_, value, key, headers), where in zip(records, published, strict=True):
            record = by_value[value]
            assert (record.partition, record.offset) == (where.partition, where.offset)
            assert (record.key, record.headers) == (key, headers)
        for key in (b"k0", b"k1", b"k2"):
            # One key, one partition, in the order given.
            same_key = [r for r in consumed if r.key == key]
            assert len({r.partition for r in same_key}) == 1
            order = [int(r.value[1:]) for r in sorted(same_key, key=lambda r: r.offset)]
            assert order == sorted(order)
        assert await bus.publish_many([]) == []

    async def test_publish_many_naming_an_unknown_topic_appends_nothing(
        self, session: BusSession, topic: str, group: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        with pytest.raises(NotFoundError):
            await bus.publish_many(
                [(topic, b"kept-out", None, None), (f"{topic}-missing", b"x", None, None)]
            )
        await bus.publish(topic, b"after")
        consumed = await self._consume(session.consumer(bus, [topic], group), 1)
        assert [r.value for r in consumed] == [b"after"]

    async def test_publish_many_with_an_invalid_record_appends_nothing(
        self, session: BusSession, topic: str, group: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        not_bytes: object = "text"
        with pytest.raises(InvalidInputError):
            await bus.publish_many(
                [(topic, b"kept-out", None, None), (topic, not_bytes, None, None)]  # type: ignore[list-item]
            )
        await bus.publish(topic, b"after")
        consumed = await self._consume(session.consumer(bus, [topic], group), 1)
        assert [r.value for r in consumed] == [b"after"]

    async def test_same_key_lands_on_same_partition(self, session: BusSession, topic: str) -> None:
        bus = await self._bus_with_topic(session, topic)
        for key in (b"alpha", b"beta", b"\x00\xff binary key"):
            landed = {(await bus.publish(topic, b"x", key=key)).partition for _ in range(10)}
            assert len(landed) == 1
            assert 0 <= landed.pop() < self.partitions

    async def test_keys_and_headers_round_trip_exactly(
        self, session: BusSession, topic: str, group: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        headers = (
            ("traceparent", b"00-abc-def-01"),
            ("dup", b"first"),
            ("binary", bytes(range(256))),
            ("dup", b"second"),
            ("empty", b""),
            ("ünïcode", "wért".encode()),
        )
        await bus.publish(topic, b"with-headers", key=b"k", headers=headers)
        await bus.publish(topic, b"mapping-headers", key=None, headers={"a": b"1", "b": b"2"})
        await bus.publish(topic, b"no-headers")
        records = {
            r.value: r for r in await self._consume(session.consumer(bus, [topic], group), 3)
        }

        assert records[b"with-headers"].headers == headers
        assert records[b"with-headers"].key == b"k"
        assert records[b"with-headers"].header("dup") == b"second"
        assert records[b"mapping-headers"].headers == (("a", b"1"), ("b", b"2"))
        assert records[b"mapping-headers"].key is None
        assert records[b"no-headers"].headers == ()

    async def test_commit_then_reopen_resumes_after_commit(
        self, session: BusSession, topic: str, group: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        for i in range(10):
            await bus.publish(topic, f"one-{i}".encode(), key=b"one-partition")
        consumer = session.consumer(bus, [topic], group)
        records = sorted(await self._consume(consumer, 10), key=lambda r: r.offset)
        assert [r.value for r in records] == [f"one-{i}".encode() for i in range(10)]
        await consumer.commit(records[:6])
        await session.close_consumer(consumer)
        await session.close_bus(bus)

        reopened = session.bus()
        resumed = await self._consume(session.consumer(reopened, [topic], group), 4)
        assert [r.value for r in resumed] == [f"one-{i}".encode() for i in range(6, 10)]
        assert [r.offset for r in resumed] == [r.offset for r in records[6:]]

    async def test_commit_everything_then_only_new_records_arrive(
        self, session: BusSession, topic: str, group: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        for i in range(12):
            await bus.publish(topic, f"old-{i}".encode())
        consumer = session.consumer(bus, [topic], group)
        await consumer.commit(await self._consume(consumer, 12))
        await session.close_consumer(consumer)
        await session.close_bus(bus)

        reopened = session.bus()
        for i in range(5):
            await reopened.publish(topic, f"new-{i}".encode())
        records = await self._consume(session.consumer(reopened, [topic], group), 5)
        assert sorted(r.value for r in records) == [f"new-{i}".encode() for i in range(5)]

    async def test_uncommitted_records_are_redelivered_after_reopen(
        self, session: BusSession, topic: str, group: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        for i in range(6):
            await bus.publish(topic, f"r{i}".encode())
        consumer = session.consumer(bus, [topic], group)
        first = await self._consume(consumer, 6)
        await session.close_consumer(consumer)
        await session.close_bus(bus)

        reopened = session.bus()
        again = await self._consume(session.consumer(reopened, [topic], group), 6)
        as_set = {(r.partition, r.offset, r.value) for r in first}
        assert {(r.partition, r.offset, r.value) for r in again} == as_set

    async def test_two_groups_are_independent(
        self, session: BusSession, topic: str, group: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        for i in range(8):
            await bus.publish(topic, f"g{i}".encode())
        first = session.consumer(bus, [topic], f"{group}-a")
        await first.commit(await self._consume(first, 8))
        second = session.consumer(bus, [topic], f"{group}-b")
        assert len(await self._consume(second, 8)) == 8

        assert (await bus.topic_stats(topic, group=f"{group}-a")).lag == 0
        assert (await bus.topic_stats(topic, group=f"{group}-b")).lag == 8

    async def test_publish_to_unknown_topic_raises_not_found(
        self, session: BusSession, topic: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        with pytest.raises(NotFoundError):
            await bus.publish(f"{topic}-never-created", b"lost?")
        # The failed publish created nothing.
        with pytest.raises(NotFoundError):
            await bus.topic_stats(f"{topic}-never-created")

    async def test_ensure_topics_is_idempotent_and_keeps_partition_counts(
        self, session: BusSession, topic: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        await bus.publish(topic, b"kept")
        await bus.ensure_topics([TopicSpec(topic, self.partitions)])
        await bus.ensure_topics(
            [TopicSpec(topic, self.partitions + 2), TopicSpec(f"{topic}-second", 2)]
        )
        stats = await bus.topic_stats(topic)
        assert len(stats.partitions) == self.partitions
        assert stats.end_offset == 1
        assert len((await bus.topic_stats(f"{topic}-second")).partitions) == 2

    async def test_empty_poll_returns_within_its_timeout(
        self, session: BusSession, topic: str, group: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        consumer = session.consumer(bus, [topic], group)
        for timeout_s in (0.3, 0.0):
            started = time.monotonic()
            assert await consumer.poll(max_records=10, timeout_s=timeout_s) == []
            assert time.monotonic() - started < timeout_s + self.poll_slack_s

    async def test_waiting_poll_returns_a_record_published_meanwhile(
        self, session: BusSession, topic: str, group: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        consumer = session.consumer(bus, [topic], group)
        assert await consumer.poll(max_records=10, timeout_s=0.1) == []
        waiting = asyncio.create_task(consumer.poll(max_records=10, timeout_s=20.0))
        started = time.monotonic()
        await bus.publish(topic, b"wake up")
        records = await waiting
        assert [r.value for r in records] == [b"wake up"]
        assert time.monotonic() - started < 10.0

    async def test_topic_stats_report_end_offsets_and_lag(
        self, session: BusSession, topic: str, group: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        counts: dict[int, int] = defaultdict(int)
        for i in range(20):
            counts[(await bus.publish(topic, b"s", key=f"key-{i}".encode())).partition] += 1
        stats = await bus.topic_stats(topic, group=group)
        assert [p.partition for p in stats.partitions] == list(range(self.partitions))
        assert {p.partition: p.end_offset for p in stats.partitions} == {
            p: counts.get(p, 0) for p in range(self.partitions)
        }
        assert all(p.committed is None for p in stats.partitions)
        assert stats.end_offset == 20 and stats.lag == 20
        assert all(p.committed is None for p in (await bus.topic_stats(topic)).partitions)

        consumer = session.consumer(bus, [topic], group)
        records = await self._consume(consumer, 20)
        busiest = max(counts, key=lambda p: counts[p])
        done = [r for r in records if r.partition == busiest]
        await consumer.commit(done)
        stats = await bus.topic_stats(topic, group=group)
        by_partition = {p.partition: p for p in stats.partitions}
        assert by_partition[busiest].committed == counts[busiest]
        assert by_partition[busiest].lag == 0
        assert stats.lag == 20 - counts[busiest]

    async def test_concurrent_publishes_land_exactly_once(
        self, session: BusSession, topic: str, group: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        n = self.concurrent_publishes
        values = [f"c{i}".encode() for i in range(n)]
        published = await asyncio.gather(*(bus.publish(topic, v) for v in values))
        assert len({(p.partition, p.offset) for p in published}) == n
        records = await self._consume(session.consumer(bus, [topic], group), n)
        assert sorted(r.value for r in records) == sorted(values)
        landed = {r.value: (r.partition, r.offset) for r in records}
        assert all(
            landed[v] == (p.partition, p.offset) for v, p in zip(values, published, strict=True)
        )
        assert (await bus.topic_stats(topic)).end_offset == n

    async def test_read_from_an_offset_moves_no_group(
        self, session: BusSession, topic: str, group: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        key = b"one-partition"
        landed = [await bus.publish(topic, f"r{i}".encode(), key=key) for i in range(5)]
        partition = landed[0].partition
        wait_s = self.consume_timeout_s  # returns as soon as the records are there

        middle = await bus.read(topic, partition, offset=2, max_records=2, timeout_s=wait_s)
        assert [(r.offset, r.value, r.key) for r in middle] == [(2, b"r2", key), (3, b"r3", key)]
        whole = await bus.read(topic, partition, offset=0, max_records=10, timeout_s=wait_s)
        assert [r.value for r in whole] == [f"r{i}".encode() for i in range(5)]
        assert await bus.read(topic, partition, offset=5, max_records=10, timeout_s=0.2) == []
        again = await bus.read(topic, partition, offset=4, max_records=10, timeout_s=wait_s)
        assert [r.value for r in again] == [b"r4"]

        # Nothing was committed for anyone: a group still starts at the beginning.
        stats = await bus.topic_stats(topic, group=group)
        assert all(p.committed is None for p in stats.partitions)
        records = await self._consume(session.consumer(bus, [topic], group), 5)
        assert sorted(r.value for r in records) == sorted(r.value for r in whole)

    async def test_read_names_an_unknown_topic_or_partition(
        self, session: BusSession, topic: str
    ) -> None:
        bus = await self._bus_with_topic(session, topic)
        with pytest.raises(NotFoundError):
            await bus.read(topic, self.partitions, offset=0, max_records=1)
        with pytest.raises(NotFoundError):
            await bus.read(f"{topic}-missing", 0, offset=0, max_records=1)
