"""The consolidation worker through a commit that fails as it does during a Kafka rebalance."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from cogsub.bus.ports import Consumer, Record
from cogsub.consolidation import ConsolidationWorker
from cogsub.core.errors import UnavailableError
from cogsub.core.memory import RetainRequest
from cogsub.core.topics import EXPERIENCE_ENRICHED
from tests.services.consolidation.stack import NOW, ConsolidationStack, consolidation_stack

BANK = "commit-bank"
GROUP = "consolidation-commits"


class FirstCommitFails:
    """A consumer whose first commit raises what the Kafka adapter raises for a rebalance."""

    def __init__(self, inner: Consumer, *, refused: asyncio.Event | None) -> None:
        self._inner = inner
        self._refused = refused
        self.failed = 0

    async def poll(self, *, max_records: int, timeout_s: float) -> list[Record]:
        return await self._inner.poll(max_records=max_records, timeout_s=timeout_s)

    async def commit(self, records: Sequence[Record]) -> None:
        if self._refused is not None and not self.failed:
            self.failed += 1
            self._refused.set()
            raise UnavailableError("kafka is unavailable: CommitFailedError (the group rebalanced)")
        await self._inner.commit(records)

    async def close(self) -> None:
        await self._inner.close()


class RebalancingBus:
    """The embedded bus, whose first consumer's first commit fails."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.consumers: list[FirstCommitFails] = []
        self.refused = asyncio.Event()

    def consumer(self, topics: Sequence[str], *, group: str) -> Consumer:
        inner = self._inner.consumer(topics, group=group)
        consumer = FirstCommitFails(inner, refused=None if self.consumers else self.refused)
        self.consumers.append(consumer)
        return consumer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def test_a_commit_refused_by_a_rebalance_is_not_committed_yet_and_the_worker_goes_on(
    tmp_path: Path,
) -> None:
    async with consolidation_stack(tmp_path) as stack:
        bus = RebalancingBus(stack.bus)
        stop = asyncio.Event()
        running = asyncio.create_task(_worker(stack, bus).run(stop))
        try:
            await _retain_turn(stack, 1)
            async with asyncio.timeout(20):
                await bus.refused.wait()
            await _retain_turn(stack, 2)
            await _until(running, lambda: _committed(stack.bus), 1)  # the next batch commits
            assert not running.done()
        finally:
            stop.set()
            await running
        assert await stack.index.count(BANK) == 4  # two turns, a fact from each
        assert await _committed(stack.bus) == 1  # the refused one was left uncommitted

        # The next member of the group reads it again; extracting it again changes nothing.
        stop = asyncio.Event()
        running = asyncio.create_task(_worker(stack, bus).run(stop))
        try:
            await _until(running, lambda: _committed(stack.bus), 2)
        finally:
            stop.set()
            await running
        assert await stack.index.count(BANK) == 4
        assert [c.failed for c in bus.consumers] == [1, 0]


def _worker(stack: ConsolidationStack, bus: RebalancingBus) -> ConsolidationWorker:
    return ConsolidationWorker(
        bus=bus,
        rounds=stack.rounds,
        facts=stack.facts,
        group=GROUP,
        poll_timeout_s=0.02,
        linger_s=0.0,
    )


async def _retain_turn(stack: ConsolidationStack, n: int) -> None:
    content = f"Dana moved the backup job to 0{n}:30 on the archive host."
    request = RetainRequest(content=content, memory_id=f"c{n}", timestamp=NOW, wait=True)
    await stack.service.retain(BANK, request)


async def _committed(bus: Any) -> int:
    """How many announcements the group has committed."""
    stats = await bus.topic_stats(EXPERIENCE_ENRICHED, group=GROUP)
    return sum(p.committed or 0 for p in stats.partitions)


async def _until(
    running: asyncio.Task[None], count: Callable[[], Awaitable[int]], expected: int
) -> None:
    """Wait until ``count()`` reaches ``expected``; re-raise what stopped the worker."""
    async with asyncio.timeout(20):
        while await count() < expected:
            if running.done():
                running.result()
                raise AssertionError("the worker stopped")
            await asyncio.sleep(0.02)
