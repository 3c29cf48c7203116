"""The consolidation worker over the bus: extraction with a real LLM endpoint, rounds, DLQ."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cogsub.bus.middleware import ConsumerMetrics
from cogsub.bus.ports import Record
from cogsub.consolidation import ConsolidationRound, ConsolidationWorker, FactStage, request_payload
from cogsub.consolidation.facts import ExtractionOutcome, PlannedBatch
from cogsub.core.errors import CogsubError
from cogsub.core.events import FactType
from cogsub.core.memory import ConsolidationReport, RetainRequest
from cogsub.core.topics import CONSOLIDATION_DLQ, CONSOLIDATION_REQUEST, EXPERIENCE_ENRICHED
from cogsub.extraction.llm import LLMExtractor
from cogsub.runtime.wiring import Consolidation
from cogsub.telemetry.metrics import Metrics
from tests.fixtures.chat_server import ChatServer
from tests.services.consolidation.stack import ConsolidationStack, consolidation_stack

BANK = "worker-bank"
MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
FACT = {
    "text": "Caroline went to a support group on 7 May 2023.",
    "fact_type": "world",
    "occurred_on": "2023-05-07",
    "entities": ["Caroline"],
}


@contextlib.asynccontextmanager
async def running_worker(
    stack: ConsolidationStack,
    chat: ChatServer,
    reports: list[ConsolidationReport],
    metrics: Metrics | None = None,
) -> AsyncIterator[ConsolidationWorker]:
    extractor = LLMExtractor(
        base_url=chat.api_url, model="gpt-test", timeout_s=5.0, max_attempts=2, backoff_base_s=0.01
    )
    facts = FactStage(
        archive=stack.archive,
        index=stack.index,
        embedder=stack.embedder,
        extractor=extractor,
        writer=stack.writer,
        semantic=False,
    )
    worker = ConsolidationWorker(
        bus=stack.bus,
        rounds=stack.rounds,
        facts=facts,
        group="consolidation-test",
        poll_timeout_s=0.02,
        on_round=reports.append,
        middlewares=[ConsumerMetrics(metrics, group="consolidation-test")] if metrics else (),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        yield worker
    finally:
        stop.set()
        await task
        await extractor.close()


async def _dead_letters(stack: ConsolidationStack, count: int) -> list[Record]:
    consumer = stack.bus.consumer([CONSOLIDATION_DLQ], group="dlq-reader")
    found: list[Record] = []
    try:
        async with asyncio.timeout(20):
            while len(found) < count:
                found += await consumer.poll(max_records=10, timeout_s=0.5)
    finally:
        await consumer.close()
    return found


async def _retain_turn(stack: ConsolidationStack, n: int) -> None:
    """Turn ``n`` of the worker tests: one plain statement, retained and announced."""
    content = f"Caroline moved the billing cron job to 0{n}:00 on the staging cluster."
    request = RetainRequest(content=content, memory_id=f"t{n}", timestamp=MAY_8, wait=True)
    await stack.service.retain(BANK, request)


async def _until(predicate: Callable[[], Awaitable[bool]], attempts: int = 1_000) -> None:
    """Poll ``predicate`` (the index has no change feed to await) for up to ~20 s."""
    for _ in range(attempts):
        if await predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the condition never held")


async def test_invalid_llm_output_leaves_the_bank_untouched(
    tmp_path: Path, chat_server: ChatServer
) -> None:
    reports: list[ConsolidationReport] = []
    async with consolidation_stack(tmp_path) as stack, running_worker(stack, chat_server, reports):
        await chat_server.queue("content", 1, content='{"facts": [{"text": 42}]}')
        await stack.service.retain(
            BANK,
            RetainRequest(
                content="Caroline: I went to a support group yesterday.",
                memory_id="turn-bad",
                timestamp=MAY_8,
                wait=True,
            ),
        )
        (letter,) = await _dead_letters(stack, 1)
        assert letter.header("cogsub-dlq-kind") == b"extraction_rejected"
        assert json.loads(letter.value)["eventId"] == "turn-bad"
        assert await stack.index.count(BANK) == 1  # the raw turn only
        assert [k async for k in stack.archive.list("consolidation/")] == []

        await chat_server.reply(json.dumps({"facts": [FACT]}))
        await stack.service.retain(
            BANK,
            RetainRequest(
                content="Caroline: I went to a support group yesterday!",
                memory_id="turn-good",
                timestamp=MAY_8,
                wait=True,
            ),
        )

        async def fact_indexed() -> bool:
            return await stack.index.count(BANK) == 3

        await _until(fact_indexed)
        sent = (await chat_server.requests())[-1]
        assert sent["body"]["response_format"]["type"] == "json_schema"
        assert "2023-05-08" in json.dumps(sent["body"]["messages"])  # the event time travels


async def test_requests_run_rounds_and_poison_goes_to_the_dead_letter_topic(
    tmp_path: Path, chat_server: ChatServer
) -> None:
    reports: list[ConsolidationReport] = []
    metrics = Metrics()
    async with (
        consolidation_stack(tmp_path) as stack,
        running_worker(stack, chat_server, reports, metrics),
    ):
        await stack.service.retain(
            BANK,
            RetainRequest(
                content="No — page the on-call lead first.",
                fact_type=FactType.CORRECTION,
                timestamp=MAY_8,
                wait=True,
            ),
        )
        await stack.bus.publish(CONSOLIDATION_REQUEST, b"not json", key=b"x")
        await stack.bus.publish(CONSOLIDATION_REQUEST, request_payload(BANK), key=BANK.encode())
        (letter,) = await _dead_letters(stack, 1)
        assert letter.value == b"not json"
        assert b"bankId" in (letter.header("cogsub-dlq-reason") or b"")
        # The worker's own letters go through the runtime's middlewares, metrics included.
        counted = metrics.consumer_dead_letters.labels(
            "consolidation-test", CONSOLIDATION_REQUEST, "invalid"
        )
        assert counted._value.get() == 1

        async def reported() -> bool:
            return bool(reports)

        await _until(reported)  # the round runs on the worker's task; its report lands here
        (report,) = reports
        assert report.bank_id == BANK and len(report.preferences) == 1


class GatedRounds:
    """The stack's rounds, each held until the test opens the gate."""

    def __init__(self, inner: ConsolidationRound) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.started: list[str] = []

    async def run(self, bank_id: str, *, decay: bool = True) -> ConsolidationReport:
        self.started.append(bank_id)
        await self.gate.wait()
        return await self.inner.run(bank_id, decay=decay)


def _worker_over(
    stack: ConsolidationStack,
    rounds: GatedRounds,
    reports: list[ConsolidationReport],
    **tuning: Any,
) -> ConsolidationWorker:
    """A worker over the stack whose rounds are ``rounds``, reporting into ``reports``."""
    return ConsolidationWorker(
        bus=stack.bus,
        rounds=rounds,  # type: ignore[arg-type]
        facts=stack.facts,
        on_round=reports.append,
        **tuning,
    )


async def test_a_round_asked_for_waits_for_the_workers_round_of_the_bank(tmp_path: Path) -> None:
    reports: list[ConsolidationReport] = []
    async with consolidation_stack(tmp_path) as stack:
        rounds = GatedRounds(stack.rounds)
        worker = _worker_over(stack, rounds, reports, group="consolidation-asked")
        asked = Consolidation(rounds=stack.rounds, worker=worker, extractor=None)
        running = asyncio.create_task(worker.round_of(BANK))  # as the schedule would

        async def held() -> bool:
            return rounds.started == [BANK]

        await _until(held)
        over_the_api = asyncio.create_task(asked.run_round(BANK))
        await asyncio.sleep(0.1)
        assert rounds.started == [BANK] and not over_the_api.done()  # no second pass beside
        rounds.gate.set()
        await running
        report = await over_the_api
        assert rounds.started == [BANK, BANK] and reports[-1] == report  # counted once, after


async def test_scheduled_rounds_run_beside_extraction_and_stop_with_the_worker(
    tmp_path: Path,
) -> None:
    reports: list[ConsolidationReport] = []
    async with consolidation_stack(tmp_path) as stack:
        rounds = GatedRounds(stack.rounds)
        worker = _worker_over(
            stack,
            rounds,
            reports,
            group="consolidation-scheduled",
            schedule_s=0.05,
            poll_timeout_s=0.02,
            stop_grace_s=0.3,
        )
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))

        async def round_started() -> bool:
            return rounds.started == [BANK]

        await _retain_turn(stack, 1)
        await _until(round_started)  # the bank got a fact, so the schedule gave it a round

        async def extracted(count: int) -> Callable[[], Awaitable[bool]]:
            async def check() -> bool:
                return await stack.index.count(BANK) == count

            return check

        await _retain_turn(stack, 2)
        await _until(await extracted(4))  # the held round does not hold extraction up
        assert reports == []
        rounds.gate.set()

        async def reported() -> bool:
            return len(reports) >= 1

        await _until(reported)
        assert reports[0].bank_id == BANK

        rounds.gate.clear()
        before = len(rounds.started)
        await _retain_turn(stack, 3)

        async def held_again() -> bool:
            return len(rounds.started) > before

        await _until(held_again)  # a round that started after the gate closed: held
        stop.set()
        async with asyncio.timeout(10):
            await task  # the held round is given its grace, then cancelled
        assert len(reports) < len(rounds.started)
        assert {r.bank_id for r in reports} == {BANK}


async def test_rounds_of_one_bank_never_overlap(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        rounds = GatedRounds(stack.rounds)
        worker = ConsolidationWorker(bus=stack.bus, rounds=rounds, facts=None)  # type: ignore[arg-type]
        first = asyncio.create_task(worker.round_of(BANK))
        second = asyncio.create_task(worker.round_of(BANK))
        other = asyncio.create_task(worker.round_of("other-bank"))
        await asyncio.sleep(0.2)
        assert sorted(rounds.started) == sorted([BANK, "other-bank"])  # the second waits
        rounds.gate.set()
        await asyncio.gather(first, second, other)
        assert sorted(rounds.started) == sorted([BANK, BANK, "other-bank"])


class GatedWrites:
    """The stack's fact stage, each batch's write held until the test opens the gate."""

    def __init__(self, inner: FactStage) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.planned = 0
        self.writes: list[str] = []  # "start" and "end" of each write, in order

    async def plan_many(self, payloads: Sequence[bytes]) -> PlannedBatch:
        planned = await self.inner.plan_many(payloads)
        self.planned += 1
        return planned

    async def write_planned(self, batch: PlannedBatch) -> list[ExtractionOutcome | CogsubError]:
        self.writes.append("start")
        await self.gate.wait()
        try:
            return await self.inner.write_planned(batch)
        finally:
            self.writes.append("end")


async def test_the_next_batch_is_planned_while_one_is_written_and_commits_wait(
    tmp_path: Path,
) -> None:
    async with consolidation_stack(tmp_path) as stack:
        facts = GatedWrites(stack.facts)
        group = "consolidation-pipelined"
        worker = ConsolidationWorker(
            bus=stack.bus,
            rounds=stack.rounds,
            facts=facts,  # type: ignore[arg-type]
            group=group,
            poll_timeout_s=0.02,
            linger_s=0.0,
        )
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))

        async def lag() -> int:
            return (await stack.bus.topic_stats(EXPERIENCE_ENRICHED, group=group)).lag

        async def first_write_held() -> bool:
            return facts.writes == ["start"]

        async def second_planned() -> bool:
            return facts.planned == 2

        async def all_committed() -> bool:
            return await lag() == 0 and len(facts.writes) == 4

        try:
            await _retain_turn(stack, 1)
            await _until(first_write_held)
            await _retain_turn(stack, 2)
            await _until(second_planned)  # planned while the first batch is being written
            assert facts.writes == ["start"]  # but its write waits for the one before it
            assert await lag() == 2  # and nothing is committed before its effects
            facts.gate.set()
            await _until(all_committed)
            assert facts.writes == ["start", "end", "start", "end"]
            assert await stack.index.count(BANK) == 4  # two turns, a fact from each
        finally:
            facts.gate.set()
            stop.set()
            await task


class FailsSecondPlan(GatedWrites):
    """Gated writes, and the second batch's planning hits a bug."""

    async def plan_many(self, payloads: Sequence[bytes]) -> PlannedBatch:
        if self.planned == 1:
            self.planned += 1
            raise RuntimeError("a bug in planning")
        return await super().plan_many(payloads)


async def test_a_failure_planning_the_next_batch_lets_the_one_in_flight_commit(
    tmp_path: Path,
) -> None:
    async with consolidation_stack(tmp_path) as stack:
        facts = FailsSecondPlan(stack.facts)
        group = "consolidation-failing-plan"
        worker = ConsolidationWorker(
            bus=stack.bus,
            rounds=stack.rounds,
            facts=facts,  # type: ignore[arg-type]
            group=group,
            poll_timeout_s=0.02,
            linger_s=0.0,
        )
        task = asyncio.create_task(worker.run(asyncio.Event()))

        async def first_write_held() -> bool:
            return facts.writes == ["start"]

        await _retain_turn(stack, 1)
        await _until(first_write_held)

        async def second_planned() -> bool:
            return facts.planned == 2

        await _retain_turn(stack, 2)
        await _until(second_planned)
        facts.gate.set()  # the loop has failed; the batch in flight is given time to land
        with pytest.raises(RuntimeError, match="a bug in planning"):
            async with asyncio.timeout(20):
                await task
        assert facts.writes == ["start", "end"]
        stats = await stack.bus.topic_stats(EXPERIENCE_ENRICHED, group=group)
        assert stats.lag == 1  # the first batch committed, the failed one delivered again
