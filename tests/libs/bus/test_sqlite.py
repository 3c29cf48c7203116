"""SqliteEventBus behaviour beyond the contract: group commit, fairness, leases, errors."""

from __future__ import annotations

import asyncio
import sqlite3
import time
import zlib
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cogsub.bus.ports import Published
from cogsub.bus.sqlite import SqliteEventBus
from cogsub.core.errors import (
    ConfigurationError,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)
from cogsub.core.topics import TopicSpec


@pytest.fixture
def db_path(data_dir: Path) -> Path:
    return data_dir / "bus.sqlite3"


@pytest.fixture
async def bus(db_path: Path, unique_name: str) -> AsyncIterator[SqliteEventBus]:
    bus = SqliteEventBus(db_path)
    await bus.ensure_topics([TopicSpec(unique_name, 3)])
    try:
        yield bus
    finally:
        await bus.close()


async def test_concurrent_publishes_share_one_transaction_and_return_after_commit(
    bus: SqliteEventBus, db_path: Path, unique_name: str
) -> None:
    observer = sqlite3.connect(db_path)
    visible_on_return: list[bool] = []

    async def publish_and_look(i: int) -> Published:
        published = await bus.publish(unique_name, f"{i}".encode())
        # Another connection sees the record as soon as publish returns: it was committed.
        row = observer.execute(
            "SELECT value FROM records WHERE topic = ? AND partition = ? AND offset = ?",
            (published.topic, published.partition, published.offset),
        ).fetchone()
        visible_on_return.append(row == (f"{i}".encode(),))
        return published

    try:
        before = bus.write_transactions
        await asyncio.gather(*(publish_and_look(i) for i in range(500)))
        assert bus.write_transactions - before <= 2
        assert visible_on_return == [True] * 500
    finally:
        observer.close()


async def test_one_bad_topic_in_a_batch_fails_only_its_own_publish(
    bus: SqliteEventBus, unique_name: str
) -> None:
    outcomes = await asyncio.gather(
        bus.publish(unique_name, b"ok-1"),
        bus.publish("no-such-topic", b"lost"),
        bus.publish(unique_name, b"ok-2"),
        return_exceptions=True,
    )
    assert isinstance(outcomes[0], Published) and isinstance(outcomes[2], Published)
    assert isinstance(outcomes[1], NotFoundError)
    assert (await bus.topic_stats(unique_name)).end_offset == 2


async def test_offsets_are_contiguous_per_partition_and_keyless_publishes_round_robin(
    bus: SqliteEventBus, unique_name: str
) -> None:
    published = await asyncio.gather(*(bus.publish(unique_name, b"x") for _ in range(30)))
    assert Counter(p.partition for p in published) == {0: 10, 1: 10, 2: 10}
    for partition in range(3):
        offsets = sorted(p.offset for p in published if p.partition == partition)
        assert offsets == list(range(10))


async def test_poll_shares_max_records_fairly_across_partitions(
    bus: SqliteEventBus, unique_name: str
) -> None:
    await asyncio.gather(*(bus.publish(unique_name, b"even") for _ in range(300)))
    consumer = bus.consumer([unique_name], group=f"{unique_name}-g")
    try:
        records = await consumer.poll(max_records=30, timeout_s=1.0)
        assert Counter(r.partition for r in records) == {0: 10, 1: 10, 2: 10}
        for partition in range(3):
            assert [r.offset for r in records if r.partition == partition] == list(range(10))
        # The next poll continues where this one stopped, in every partition.
        records = await consumer.poll(max_records=30, timeout_s=1.0)
        for partition in range(3):
            assert [r.offset for r in records if r.partition == partition] == list(range(10, 20))
    finally:
        await consumer.close()


async def test_poll_gives_leftover_capacity_to_busier_partitions(
    bus: SqliteEventBus, unique_name: str
) -> None:
    keys: dict[int, bytes] = {}
    for i in range(50):  # one key for each partition (the documented crc32 partitioner)
        keys.setdefault(zlib.crc32(f"key-{i}".encode()) % 3, f"key-{i}".encode())
    await asyncio.gather(*(bus.publish(unique_name, b"busy", key=keys[0]) for _ in range(100)))
    await asyncio.gather(*(bus.publish(unique_name, b"quiet", key=keys[1]) for _ in range(2)))
    consumer = bus.consumer([unique_name], group=f"{unique_name}-g")
    try:
        records = await consumer.poll(max_records=30, timeout_s=1.0)
        assert Counter(r.partition for r in records) == {0: 28, 1: 2}
    finally:
        await consumer.close()


async def test_a_second_live_consumer_of_a_group_is_refused(
    bus: SqliteEventBus, db_path: Path, unique_name: str
) -> None:
    group = f"{unique_name}-g"
    first = bus.consumer([unique_name], group=group)
    other_bus = SqliteEventBus(db_path)
    second = other_bus.consumer([unique_name], group=group)
    elsewhere = bus.consumer([unique_name], group=f"{group}-other")
    try:
        assert await first.poll(max_records=1, timeout_s=0) == []
        with pytest.raises(ConfigurationError, match="one consumer per group"):
            await second.poll(max_records=1, timeout_s=0)
        assert await elsewhere.poll(max_records=1, timeout_s=0) == []
        await first.close()
        assert await second.poll(max_records=1, timeout_s=0) == []
    finally:
        for consumer in (first, second, elsewhere):
            await consumer.close()
        await other_bus.close()


async def test_a_live_consumer_keeps_renewing_its_lease(db_path: Path, unique_name: str) -> None:
    bus = SqliteEventBus(db_path, lease_ttl_s=0.3)
    await bus.ensure_topics([TopicSpec(unique_name, 1)])
    owner = bus.consumer([unique_name], group="g")
    intruder = bus.consumer([unique_name], group="g")
    try:
        await owner.poll(max_records=1, timeout_s=0)
        await asyncio.sleep(1.0)  # several lease lifetimes, with no poll from the owner
        with pytest.raises(ConfigurationError):
            await intruder.poll(max_records=1, timeout_s=0)
    finally:
        await owner.close()
        await intruder.close()
        await bus.close()


async def test_a_consumer_that_lost_its_lease_cannot_commit(
    bus: SqliteEventBus, db_path: Path, unique_name: str
) -> None:
    await bus.publish(unique_name, b"work")
    consumer = bus.consumer([unique_name], group="g")
    try:
        records = await consumer.poll(max_records=10, timeout_s=1.0)
        with sqlite3.connect(db_path) as raw:  # another owner took the group over
            raw.execute(
                "UPDATE group_leases SET owner = 'someone-else', expires_ms = ?",
                (int(time.time() * 1000) + 60_000,),
            )
        with pytest.raises(ConfigurationError):
            await consumer.commit(records)
        assert all(
            p.committed is None for p in (await bus.topic_stats(unique_name, group="g")).partitions
        )
    finally:
        await consumer.close()


async def test_close_flushes_publishes_still_queued(db_path: Path, unique_name: str) -> None:
    bus = SqliteEventBus(db_path)
    await bus.ensure_topics([TopicSpec(unique_name, 2)])
    tasks = [asyncio.create_task(bus.publish(unique_name, b"q")) for _ in range(100)]
    await asyncio.sleep(0)  # let the publishes queue up before closing
    await bus.close()
    assert all(isinstance(task.result(), Published) for task in tasks)
    with pytest.raises(UnavailableError):
        await bus.publish(unique_name, b"after close")
    reopened = SqliteEventBus(db_path)
    try:
        assert (await reopened.topic_stats(unique_name)).end_offset == 100
    finally:
        await reopened.close()


async def test_consuming_an_unknown_topic_raises_not_found(bus: SqliteEventBus) -> None:
    consumer = bus.consumer(["never-created"], group="g")
    try:
        with pytest.raises(NotFoundError):
            await consumer.poll(max_records=1, timeout_s=0)
    finally:
        await consumer.close()


async def test_non_bytes_values_and_headers_are_invalid_input(
    bus: SqliteEventBus, unique_name: str
) -> None:
    with pytest.raises(InvalidInputError):
        await bus.publish(unique_name, "text", key=None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        await bus.publish(unique_name, b"v", headers={"h": "text"})  # type: ignore[dict-item]
    with pytest.raises(InvalidInputError):
        await bus.ensure_topics([TopicSpec("zero-partitions", 0)])


async def test_a_file_that_is_not_a_database_is_a_configuration_error(data_dir: Path) -> None:
    path = data_dir / "not-a-db.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    bus = SqliteEventBus(path)
    try:
        with pytest.raises(ConfigurationError):
            await bus.ensure_topics([TopicSpec("t", 1)])
    finally:
        await bus.close()


async def test_a_directory_that_cannot_exist_is_a_configuration_error(data_dir: Path) -> None:
    (data_dir / "file").write_bytes(b"")
    bus = SqliteEventBus(data_dir / "file" / "bus.sqlite3")
    try:
        with pytest.raises(ConfigurationError):
            await bus.ensure_topics([TopicSpec("t", 1)])
    finally:
        await bus.close()


async def test_committed_offsets_never_move_backwards(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cogsub.bus.sqlite import SqliteEventBus
    from cogsub.core import TopicSpec

    bus = SqliteEventBus(tmp_path / "bus.sqlite3")
    await bus.ensure_topics([TopicSpec("t", 1)])
    for i in range(5):
        await bus.publish("t", b"%d" % i)
    consumer = bus.consumer(["t"], group="g")
    records = await consumer.poll(max_records=5, timeout_s=1)
    await consumer.commit(records)
    await consumer.commit(records[:2])  # a late, older commit
    stats = await bus.topic_stats("t", group="g")
    assert stats.partitions[0].committed == 5
    await consumer.close()
    await bus.close()


async def test_publish_many_lands_in_order_in_one_transaction(
    bus: SqliteEventBus, db_path: Path, unique_name: str
) -> None:
    other = f"{unique_name}-other"
    await bus.ensure_topics([TopicSpec(other, 1)])
    records = [
        (
            unique_name if i % 2 else other,
            f"v{i}".encode(),
            f"k{i % 3}".encode(),
            (("h", b"%d" % i),),
        )
        for i in range(40)
    ]
    before = bus.write_transactions
    published, single = await asyncio.gather(
        bus.publish_many(records), bus.publish(unique_name, b"alone", key=b"k0")
    )
    assert bus.write_transactions - before <= 2  # shares the group commit with publish
    assert [p.topic for p in published] == [topic for topic, *_ in records]
    observer = sqlite3.connect(db_path)
    try:
        for (topic, value, key, _), where in zip(records, published, strict=True):
            assert where.partition == (0 if topic == other else zlib.crc32(key) % 3)
            row = observer.execute(
                "SELECT value, key FROM records WHERE topic = ? AND partition = ? AND offset = ?",
                (where.topic, where.partition, where.offset),
            ).fetchone()
            assert row == (value, key)
    finally:
        observer.close()
    offsets = [p.offset for p in published if p.topic == other]
    assert offsets == list(range(20))  # one partition: the call's order is the log's order
    consumer = bus.consumer([other], group=unique_name)
    got = await consumer.poll(max_records=100, timeout_s=1)
    await consumer.close()
    assert [r.value for r in got] == [value for topic, value, *_ in records if topic == other]
    assert [r.headers for r in got] == [h for topic, _, _, h in records if topic == other]
    assert single.topic == unique_name


async def test_publish_many_is_all_or_nothing(bus: SqliteEventBus, unique_name: str) -> None:
    with pytest.raises(NotFoundError):
        await bus.publish_many(
            [(unique_name, b"a", None, None), ("no-such-topic", b"b", None, None)]
        )
    with pytest.raises(InvalidInputError):
        await bus.publish_many([(unique_name, b"a", None, None), (unique_name, "text", None, None)])  # type: ignore[list-item]
    assert (await bus.topic_stats(unique_name)).end_offset == 0
    before = bus.write_transactions
    assert await bus.publish_many([]) == []
    assert bus.write_transactions == before


async def test_publish_many_larger_than_max_batch_still_lands_whole(
    db_path: Path, unique_name: str
) -> None:
    bus = SqliteEventBus(db_path, max_batch=10)
    try:
        await bus.ensure_topics([TopicSpec(unique_name, 1)])
        small, big = await asyncio.gather(
            bus.publish(unique_name, b"first"),
            bus.publish_many([(unique_name, b"%d" % i, None, None) for i in range(25)]),
        )
        assert [p.offset for p in big] == list(range(1, 26)) and small.offset == 0
    finally:
        await bus.close()


async def test_retention_trims_only_what_every_group_has_read(
    db_path: Path, unique_name: str
) -> None:
    bus = SqliteEventBus(db_path, retention_s=0.0, trim_every_s=3600)
    try:
        await bus.ensure_topics([TopicSpec(unique_name, 1)])
        for i in range(6):
            await bus.publish(unique_name, f"secret-{i}".encode())
        assert await bus.trim() == 0  # no group has read the partition: it is kept whole
        fast, slow = (
            bus.consumer([unique_name], group="fast"),
            bus.consumer([unique_name], group="slow"),
        )
        read = await fast.poll(max_records=10, timeout_s=1)
        await fast.commit(read)  # all six
        await slow.commit((await slow.poll(max_records=2, timeout_s=1))[:2])  # two
        assert await bus.trim() == 2  # below the slower group's offset only
        await slow.commit(await slow.poll(max_records=10, timeout_s=1))
        assert await bus.trim() == 3  # the newest record stays: it carries the next offset
        published = await bus.publish(unique_name, b"later")
        assert published.offset == 6  # offsets never restart
        assert [r.value for r in await slow.poll(max_records=10, timeout_s=1)] == [b"later"]
        await fast.close()
        await slow.close()
        stats = await bus.topic_stats(unique_name, group="slow")
        assert stats.partitions[0].end_offset == 7
    finally:
        await bus.close()
    raw = b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))
    assert b"secret-0" not in raw and b"secret-4" not in raw  # trimmed bytes are overwritten
    assert b"secret-5" in raw  # the one record kept


async def test_retention_keeps_records_younger_than_it(db_path: Path, unique_name: str) -> None:
    bus = SqliteEventBus(db_path, retention_s=3600.0)
    try:
        await bus.ensure_topics([TopicSpec(unique_name, 1)])
        for i in range(3):
            await bus.publish(unique_name, f"r{i}".encode())
        consumer = bus.consumer([unique_name], group="g")
        await consumer.commit(await consumer.poll(max_records=10, timeout_s=1))
        await consumer.close()
        assert await bus.trim() == 0
    finally:
        await bus.close()
    default = SqliteEventBus(db_path)
    assert default.retention_s is None  # the default keeps everything
    await default.close()


async def test_publishing_trims_when_a_trim_is_due(db_path: Path, unique_name: str) -> None:
    bus = SqliteEventBus(db_path, retention_s=0.0, trim_every_s=1e-9)
    try:
        await bus.ensure_topics([TopicSpec(unique_name, 1)])
        for i in range(3):
            await bus.publish(unique_name, f"r{i}".encode())
        consumer = bus.consumer([unique_name], group="g")
        await consumer.commit(await consumer.poll(max_records=10, timeout_s=1))
        await consumer.close()
        await bus.publish(unique_name, b"r3")  # its flush runs the due trim
    finally:
        await bus.close()  # waits for the flush, trim included
    with sqlite3.connect(db_path) as conn:
        (left,) = conn.execute("SELECT COUNT(*) FROM records").fetchone()
    assert left == 1
