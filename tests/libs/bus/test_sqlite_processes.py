"""SqliteEventBus shared between processes: concurrent appends, kill -9 durability, lease expiry."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from cogsub.bus.ports import Record
from cogsub.bus.sqlite import SqliteEventBus
from cogsub.core.errors import ConfigurationError
from cogsub.core.topics import TopicSpec

# Publishes argv[3] records in small concurrent bursts, then exits.
_APPENDER = """
import asyncio, sys
from cogsub.bus.sqlite import SqliteEventBus

async def main():
    bus = SqliteEventBus(sys.argv[1])
    for start in range(0, int(sys.argv[3]), 10):
        await asyncio.gather(*(bus.publish(sys.argv[2], b"child-%d" % i)
                               for i in range(start, start + 10)))
    await bus.close()

asyncio.run(main())
"""

# Publishes one record, takes the group's lease, says where the record landed,
# then idles until it is killed.
_KILLED_OWNER = """
import asyncio, sys
from cogsub.bus.sqlite import SqliteEventBus

async def main():
    bus = SqliteEventBus(sys.argv[1], lease_ttl_s=float(sys.argv[4]))
    published = await bus.publish(sys.argv[2], b"acknowledged", key=b"k")
    consumer = bus.consumer([sys.argv[2]], group=sys.argv[3])
    await consumer.poll(max_records=1, timeout_s=0)
    print(published.partition, published.offset, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def _start(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=10)


async def test_records_appended_by_another_process_reach_a_waiting_consumer(
    data_dir: Path, unique_name: str
) -> None:
    path = data_dir / "bus.sqlite3"
    bus = SqliteEventBus(path)
    await bus.ensure_topics([TopicSpec(unique_name, 3)])
    consumer = bus.consumer([unique_name], group="g")
    assert await consumer.poll(max_records=10, timeout_s=0) == []
    child = _start(_APPENDER, str(path), unique_name, "200")
    try:
        # Both processes append at the same time.
        for start in range(0, 200, 10):
            await asyncio.gather(
                *(
                    bus.publish(unique_name, f"parent-{i}".encode())
                    for i in range(start, start + 10)
                )
            )
        records: list[Record] = []
        deadline = time.monotonic() + 20
        while len(records) < 400 and time.monotonic() < deadline:
            records += await consumer.poll(max_records=500, timeout_s=1.0)
        _, stderr = await asyncio.to_thread(child.communicate, timeout=20)
        assert child.returncode == 0, stderr
    finally:
        _stop(child)
        await consumer.close()
        await bus.close()

    values = sorted(r.value for r in records)
    expected = [f"{who}-{i}".encode() for who in ("child", "parent") for i in range(200)]
    assert values == sorted(expected)
    by_partition: dict[int, list[int]] = defaultdict(list)
    for record in records:
        by_partition[record.partition].append(record.offset)
    for offsets in by_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))


async def test_an_acknowledged_publish_survives_kill_9_and_the_dead_lease_is_taken_over(
    data_dir: Path, unique_name: str
) -> None:
    path = data_dir / "bus.sqlite3"
    setup = SqliteEventBus(path)
    await setup.ensure_topics([TopicSpec(unique_name, 3)])
    await setup.close()

    lease_ttl_s = 1.5
    child = _start(_KILLED_OWNER, str(path), unique_name, "g", str(lease_ttl_s))
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), timeout=20)
        assert line, child.communicate(timeout=10)[1]
        os.kill(child.pid, signal.SIGKILL)
        await asyncio.to_thread(child.wait, 10)
        killed_at = time.monotonic()
    finally:
        _stop(child)
    assert child.returncode == -signal.SIGKILL
    partition, offset = (int(part) for part in line.split())

    bus = SqliteEventBus(path, lease_ttl_s=60)
    consumer = bus.consumer([unique_name], group="g")
    try:
        # The owner was a process on this host that no longer exists: no need to wait
        # for its lease to expire before the uncommitted record is delivered again.
        records = await consumer.poll(max_records=10, timeout_s=1.0)
        assert time.monotonic() - killed_at < lease_ttl_s
        assert [(r.partition, r.offset, r.value) for r in records] == [
            (partition, offset, b"acknowledged")
        ]
    finally:
        await consumer.close()
        await bus.close()


async def test_a_lease_from_another_host_holds_until_it_expires(
    data_dir: Path, unique_name: str
) -> None:
    import sqlite3

    path = data_dir / "bus.sqlite3"
    bus = SqliteEventBus(path, lease_ttl_s=1.0)
    await bus.ensure_topics([TopicSpec(unique_name, 1)])
    expires_ms = int(time.time() * 1000) + 1000
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO group_leases (group_name, owner, expires_ms) VALUES (?, ?, ?)",
            ("g", "some-other-host:1:abc", expires_ms),
        )
    consumer = bus.consumer([unique_name], group="g")
    try:
        with pytest.raises(ConfigurationError, match="already has a live consumer"):
            await consumer.poll(max_records=10, timeout_s=0)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                assert await consumer.poll(max_records=10, timeout_s=0.1) == []
                break
            except ConfigurationError:
                await asyncio.sleep(0.1)  # no event announces a lease expiry: look again
        else:
            raise AssertionError("the remote owner's lease never expired")
    finally:
        await consumer.close()
        await bus.close()
