"""The consolidation worker dies after each step of a batch; a restarted one completes it once.

The same coverage the ingestion worker has (tests/services/ingestion/test_worker.py):
a crash after planning, after writing the facts, after a dead letter, after a
requested round and after the commit leaves nothing lost and nothing twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cogsub.bus.ports import Consumer, Record
from cogsub.consolidation import ConsolidationWorker, request_payload
from cogsub.consolidation.facts import PlannedBatch
from cogsub.core.memory import ConsolidationReport, RetainRequest
from cogsub.core.topics import CONSOLIDATION_DLQ, CONSOLIDATION_REQUEST, EXPERIENCE_ENRICHED
from tests.services.consolidation.stack import NOW, ConsolidationStack, consolidation_stack

BANK = "crash-bank"
GROUP = "consolidation-crash"
STEPS = ("plan", "write", "dead_letter", "round", "commit")


class SimulatedCrash(BaseException):
    """Stands for the process dying: nothing in the worker may catch it."""


class Fuse:
    def __init__(self, step: str | None) -> None:
        self.step = step

    def after(self, step: str) -> None:
        if step == self.step:
            self.step = None  # blows once: the restarted worker shares nothing else
            raise SimulatedCrash(step)


class CrashingFacts:
    def __init__(self, inner: Any, fuse: Fuse) -> None:
        self._inner, self._fuse = inner, fuse

    async def plan_many(self, payloads: Sequence[bytes]) -> PlannedBatch:
        planned = await self._inner.plan_many(payloads)
        self._fuse.after("plan")
        return planned

    async def write_planned(self, batch: PlannedBatch) -> list[Any]:
        written = await self._inner.write_planned(batch)
        self._fuse.after("write")
        return list(written)


class CrashingRounds:
    def __init__(self, inner: Any, fuse: Fuse) -> None:
        self._inner, self._fuse = inner, fuse

    async def run(self, bank_id: str, *, decay: bool = True) -> ConsolidationReport:
        report: ConsolidationReport = await self._inner.run(bank_id, decay=decay)
        self._fuse.after("round")
        return report


class CrashingConsumer:
    def __init__(self, inner: Consumer, fuse: Fuse) -> None:
        self._inner, self._fuse = inner, fuse

    async def poll(self, *, max_records: int, timeout_s: float) -> list[Record]:
        return await self._inner.poll(max_records=max_records, timeout_s=timeout_s)

    async def commit(self, records: Sequence[Record]) -> None:
        await self._inner.commit(records)
        self._fuse.after("commit")

    async def close(self) -> None:
        await self._inner.close()


class CrashingBus:
    def __init__(self, inner: Any, fuse: Fuse) -> None:
        self._inner, self._fuse = inner, fuse

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def consumer(self, topics: Sequence[str], *, group: str) -> Consumer:
        return CrashingConsumer(self._inner.consumer(topics, group=group), self._fuse)

    async def publish(self, topic: str, value: bytes, **kwargs: Any) -> Any:
        published = await self._inner.publish(topic, value, **kwargs)
        if topic == CONSOLIDATION_DLQ:
            self._fuse.after("dead_letter")
        return published


def _worker(stack: ConsolidationStack, fuse: Fuse) -> ConsolidationWorker:
    return ConsolidationWorker(
        bus=CrashingBus(stack.bus, fuse),  # type: ignore[arg-type]
        rounds=CrashingRounds(stack.rounds, fuse),  # type: ignore[arg-type]
        facts=CrashingFacts(stack.facts, fuse),  # type: ignore[arg-type]
        group=GROUP,
        poll_timeout_s=0.02,
        linger_s=0.0,
    )


async def _backlog(stack: ConsolidationStack) -> None:
    """Three turns to extract, a request that is not JSON, and a round of the bank."""
    for n in range(3):
        content = f"Priya moved the nightly export to 0{n + 1}:15 on the reporting host."
        request = RetainRequest(content=content, memory_id=f"x{n}", timestamp=NOW, wait=True)
        await stack.service.retain(BANK, request)
    await stack.bus.publish(CONSOLIDATION_REQUEST, b"not json", key=b"x")
    await stack.bus.publish(CONSOLIDATION_REQUEST, request_payload(BANK), key=BANK.encode())


async def _lag(stack: ConsolidationStack) -> int:
    topics = (EXPERIENCE_ENRICHED, CONSOLIDATION_REQUEST)
    return sum([(await stack.bus.topic_stats(t, group=GROUP)).lag for t in topics])


async def _until_done(stack: ConsolidationStack) -> None:
    stop = asyncio.Event()
    running = asyncio.create_task(_worker(stack, Fuse(None)).run(stop))
    try:
        for _ in range(1_000):
            if not await _lag(stack):
                return
            await asyncio.sleep(0.02)
        raise AssertionError("the backlog was never committed")
    finally:
        stop.set()
        await running


async def _state(stack: ConsolidationStack) -> tuple[int, list[str], set[bytes]]:
    derived = sorted([k async for k in stack.archive.list("consolidation/")])
    letters = await stack.bus.read(CONSOLIDATION_DLQ, 0, offset=0, max_records=100)
    for partition in range(1, len((await stack.bus.topic_stats(CONSOLIDATION_DLQ)).partitions)):
        letters += await stack.bus.read(CONSOLIDATION_DLQ, partition, offset=0, max_records=100)
    return await stack.index.count(BANK), derived, {letter.value for letter in letters}


@pytest.mark.parametrize("step", STEPS)
async def test_a_crash_after_any_step_is_completed_by_the_restarted_worker(
    tmp_path: Path, step: str
) -> None:
    async with consolidation_stack(tmp_path / "clean") as clean:
        await _backlog(clean)
        await _until_done(clean)
        expected = await _state(clean)
    assert expected[0] > 3 and expected[2] == {b"not json"}  # facts were extracted

    async with consolidation_stack(tmp_path / "crash") as stack:
        await _backlog(stack)
        with pytest.raises(SimulatedCrash):
            async with asyncio.timeout(20):
                await _worker(stack, Fuse(step)).run(asyncio.Event())
        await _until_done(stack)  # a new process: the group reads what was not committed
        assert await _state(stack) == expected
