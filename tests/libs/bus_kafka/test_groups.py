"""Consumer groups under churn: a rebalance, and a member killed without warning.

Runs on Tansu: noida-db never evicts a SIGKILLed member and refuses commits during
a rebalance. Tansu has no idempotent producer and miscounts end offsets of
multi-record batches, so the producer runs without idempotence and nothing here
asserts end offsets.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiokafka.errors import KafkaConnectionError

from cogsub.bus.kafka import KafkaEventBus, KafkaSettings
from cogsub.bus.ports import Record
from cogsub.core import TopicSpec, UnavailableError

pytestmark = [pytest.mark.connected, pytest.mark.slow]

MEMBER_SCRIPT = Path(__file__).with_name("_crash_member.py")
SESSION_TIMEOUT_MS = 6_000
PARTITIONS = 4
RECORDS = 40

Position = tuple[int, int]


class Member:
    """The child-process member: its reports, read as they come."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.assigned: set[int] = set()
        self.received: set[Position] = set()
        self.changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for line in self.process.stdout:
            report = json.loads(line)
            self.assigned = set(report["assigned"])
            self.received |= {(p, o) for p, o in report["received"]}
            self.changed.set()

    async def wait_until_received(self, expected: set[Position], *, within_s: float) -> None:
        async with asyncio.timeout(within_s):
            while self.received != expected:
                self.changed.clear()
                await self.changed.wait()

    async def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()
        await self._reader  # ends at the closed pipe


@pytest.fixture
async def member_factory() -> AsyncIterator[list[Member]]:
    members: list[Member] = []
    yield members
    for member in members:
        await member.kill()


async def start_member(
    members: list[Member], log: Path, bootstrap: str, topic: str, group: str
) -> Member:
    with log.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(MEMBER_SCRIPT),
            bootstrap,
            topic,
            group,
            str(SESSION_TIMEOUT_MS),
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
        )
    member = Member(process)
    members.append(member)
    return member


async def test_survivor_gets_a_killed_members_partitions_and_its_uncommitted_records(
    tansu_bootstrap: str, unique_name: str, tmp_path: Path, member_factory: list[Member]
) -> None:
    settings = KafkaSettings(
        enable_idempotence=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=SESSION_TIMEOUT_MS // 6,
    )
    bus = KafkaEventBus(bootstrap_servers=tansu_bootstrap, settings=settings)
    survivor = bus.consumer([unique_name], group=unique_name)
    try:
        await bus.ensure_topics([TopicSpec(unique_name, PARTITIONS)])
        published = [
            await bus.publish(unique_name, b"%d" % i, key=b"key-%d" % i) for i in range(RECORDS)
        ]
        everything = {(p.partition, p.offset) for p in published}
        assert {p for p, _ in everything} == set(range(PARTITIONS))

        # Alone in the group, the child member reads every record and commits none.
        log = tmp_path / "member.log"
        member = await start_member(member_factory, log, tansu_bootstrap, unique_name, unique_name)
        try:
            await member.wait_until_received(everything, within_s=15)
        except TimeoutError:
            pytest.fail(f"member read {len(member.received)} records; log:\n{log.read_text()}")

        # The survivor joins: the two members now split the partitions.
        seen: set[Position] = set()
        async with asyncio.timeout(15):
            while not seen:
                records = await survivor.poll(max_records=500, timeout_s=0.5)
                seen |= {(r.partition, r.offset) for r in records}
                await survivor.commit(records)
        own = {p for _, p in survivor.assigned_partitions()}
        assert 0 < len(own) < PARTITIONS
        orphaned = set(range(PARTITIONS)) - own

        await member.kill()  # SIGKILL: no leave-group, no last commit
        killed_at = time.monotonic()
        async with asyncio.timeout(25):
            while seen != everything:
                records = await survivor.poll(max_records=500, timeout_s=0.5)
                seen |= {(r.partition, r.offset) for r in records}
                await survivor.commit(records)
        took = time.monotonic() - killed_at
        print(f"\nsurvivor took over {sorted(orphaned)} {took:.1f}s after the kill")

        assert {p for _, p in survivor.assigned_partitions()} == set(range(PARTITIONS))
        # The dead member never committed, so its partitions came again from the start.
        assert {pos for pos in seen if pos[0] in orphaned} == {
            pos for pos in everything if pos[0] in orphaned
        }
        stats = await bus.topic_stats(unique_name, group=unique_name)
        highest = {p: max(o for q, o in everything if q == p) for p in range(PARTITIONS)}
        assert {s.partition: s.committed for s in stats.partitions} == {
            p: o + 1 for p, o in highest.items()
        }
    finally:
        await survivor.close()
        await bus.close()


async def test_a_rebalance_commits_what_was_marked_done_and_nothing_more(
    tansu_bootstrap: str, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # noida-db refuses offset commits while a rebalance is pending (IllegalGeneration);
    # Kafka and Tansu accept them, and rebalance listeners rely on that.
    settings = KafkaSettings(
        enable_idempotence=False, session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=300
    )
    bus = KafkaEventBus(bootstrap_servers=tansu_bootstrap, settings=settings)
    try:
        await bus.ensure_topics([TopicSpec(unique_name, 1)])
        for i in range(6):
            await bus.publish(unique_name, b"%d" % i)
        first = bus.consumer([unique_name], group=unique_name)
        records: list[Record] = []
        async with asyncio.timeout(15):
            while len(records) < 6:
                records += await first.poll(max_records=10, timeout_s=0.5)
        assert [r.offset for r in records] == list(range(6))

        # The broker drops the caller's commit of the first three records...
        vendor = first._consumer
        real_commit = vendor.commit

        async def fail_once(offsets: object) -> None:
            monkeypatch.setattr(vendor, "commit", real_commit)
            raise KafkaConnectionError("injected")

        monkeypatch.setattr(vendor, "commit", fail_once)
        with pytest.raises(UnavailableError):
            await first.commit(records[:3])

        # ...so when a second member joins and the partition is revoked, the listener
        # commits those three: what the caller marked done, not what was fetched.
        second = bus.consumer([unique_name], group=unique_name)
        again: list[Record] = []
        async with asyncio.timeout(20):
            while sorted(r.offset for r in again) != [3, 4, 5]:
                again += await second.poll(max_records=10, timeout_s=0.2)
                again += await first.poll(max_records=10, timeout_s=0.2)
        stats = await bus.topic_stats(unique_name, group=unique_name)
        assert [p.committed for p in stats.partitions] == [3]
    finally:
        await bus.close()
