"""Two consolidator replicas on one Kafka-protocol broker, the second joining mid-batch.

noida-db is the broker: it refuses offset commits while a rebalance is pending
(``IllegalGeneration``, aiokafka's ``CommitFailedError``), which is what a
replica whose batch straddles another member's join meets. No member is killed,
so the eviction Tansu has is not needed, and noida-db's end offsets are exact.
The archive and index are the embedded ones: the group's behaviour is the subject.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from structlog.testing import capture_logs

from cogsub.archive.filesystem import FilesystemArchive
from cogsub.bus.kafka import KafkaEventBus, KafkaSettings
from cogsub.consolidation import ConsolidationRound, ConsolidationWorker, DerivedWriter, FactStage
from cogsub.consolidation.facts import ExtractionOutcome, PlannedBatch
from cogsub.core.errors import CogsubError
from cogsub.core.memory import RetainRequest
from cogsub.core.topics import CONSOLIDATION_TOPICS, EXPERIENCE_ENRICHED, STAGE1_TOPICS
from cogsub.embeddings.hash import HashEmbedder
from cogsub.extraction.offline import OfflineExtractor
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.ingestion import IngestionWorker
from cogsub.recall import MemoryService
from tests.fixtures.kafka import KafkaServerProcess

pytestmark = [pytest.mark.connected, pytest.mark.slow, pytest.mark.timeout(180)]

NAMES = ["Priya", "Tomas", "Ingrid", "Kwame", "Yuki", "Omar", "Lena", "Diego"]
ITEMS = ["ladder", "kayak", "toolbox", "tent", "bicycle"]
BANKS = [f"bank-{i}" for i in range(4)]
GROUP = "consolidation-replicas"
SETTLE_S = 90.0


@dataclass
class Parts:
    """The embedded archive and index, and what every replica builds on them."""

    archive: FilesystemArchive
    index: SqliteMemoryIndex
    embedder: HashEmbedder

    def facts(self, bus: KafkaEventBus) -> FactStage:
        return FactStage(
            archive=self.archive,
            index=self.index,
            embedder=self.embedder,
            extractor=OfflineExtractor(),
            writer=self.writer(bus),
            semantic=False,
        )

    def rounds(self, bus: KafkaEventBus) -> ConsolidationRound:
        return ConsolidationRound(archive=self.archive, index=self.index, writer=self.writer(bus))

    def writer(self, bus: KafkaEventBus) -> DerivedWriter:
        return DerivedWriter(
            bus=bus, archive=self.archive, index=self.index, embedder=self.embedder
        )


class HeldWrites:
    """A fact stage whose first write waits for ``release``: a batch caught mid-flight."""

    def __init__(self, inner: FactStage) -> None:
        self.inner = inner
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def plan_many(self, payloads: Sequence[bytes]) -> PlannedBatch:
        return await self.inner.plan_many(payloads)

    async def write_planned(self, batch: PlannedBatch) -> list[ExtractionOutcome | CogsubError]:
        self.holding.set()
        await self.release.wait()
        return await self.inner.write_planned(batch)


def _statement(i: int) -> str:
    return f"{NAMES[i % len(NAMES)]} keeps the {ITEMS[i // len(NAMES)]} in the garage."


@contextlib.asynccontextmanager
async def _buses(bootstrap: str, count: int) -> AsyncIterator[list[KafkaEventBus]]:
    """One bus per process-like part; each member of a group is its own client."""
    # Heartbeats far apart: a member learns of a rebalance late, so the window in which
    # its commit is refused is wide enough for the test to land a commit in it.
    settings = KafkaSettings(
        enable_idempotence=False, session_timeout_ms=10_000, heartbeat_interval_ms=3_000
    )
    buses = [KafkaEventBus(bootstrap_servers=bootstrap, settings=settings) for _ in range(count)]
    try:
        yield buses
    finally:
        for bus in buses:
            await bus.close()


def _replica(
    bus: KafkaEventBus, parts: Parts, facts: FactStage | HeldWrites
) -> ConsolidationWorker:
    return ConsolidationWorker(
        bus=bus,
        rounds=parts.rounds(bus),
        facts=facts,  # type: ignore[arg-type]
        group=GROUP,
        schedule_s=3600.0,
        poll_timeout_s=0.1,
        batch_size=8,
        linger_s=0.0,
    )


async def _settled(bus: KafkaEventBus, parts: Parts, tasks: Sequence[asyncio.Task[None]]) -> None:
    """Until every event and its fact are indexed and the group has committed everything."""
    expected = {bank: 0 for bank in BANKS}
    for i in range(len(NAMES) * len(ITEMS)):
        expected[BANKS[i % len(BANKS)]] += 2  # the event and the fact extracted from it
    async with asyncio.timeout(SETTLE_S):
        while True:
            for task in tasks:
                if task.done():
                    task.result()  # what stopped a worker
                    raise AssertionError("a worker stopped")
            counts = {bank: await parts.index.count(bank) for bank in BANKS}
            lag = (await bus.topic_stats(EXPERIENCE_ENRICHED, group=GROUP)).lag
            if counts == expected and lag == 0:
                return
            await asyncio.sleep(0.2)


async def _until_rebalancing(bootstrap: str) -> None:
    """Until the broker says the group is rebalancing (a member has asked to join)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        for _ in range(1_500):  # ~30 s; the broker has no change feed to await
            if await _group_state(admin) not in ("Stable", "Empty", "Dead"):
                return
            await asyncio.sleep(0.02)
        raise AssertionError("the group never started rebalancing")
    finally:
        await admin.close()


async def _group_state(admin: AIOKafkaAdminClient) -> str:
    (described,) = await admin.describe_consumer_groups([GROUP])
    state: str = described.groups[0][2]
    return state


async def test_a_member_joining_mid_batch_loses_nothing_and_stops_no_replica(
    noida_kafka_server: KafkaServerProcess, tmp_path: Path
) -> None:
    parts = Parts(
        FilesystemArchive(tmp_path / "archive"),
        SqliteMemoryIndex(tmp_path / "index.sqlite3"),
        HashEmbedder(),
    )
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    try:
        async with _buses(noida_kafka_server.bootstrap, 4) as (api_bus, ingest_bus, bus_a, bus_b):
            ingestion = IngestionWorker(
                bus=ingest_bus,
                archive=parts.archive,
                index=parts.index,
                embedder=parts.embedder,
                poll_timeout_s=0.1,
                messaging_system="kafka",
            )
            await ingestion.prepare()
            await _retain_all(api_bus, parts)
            held = HeldWrites(parts.facts(bus_a))
            try:
                with capture_logs() as logs:
                    tasks.append(asyncio.create_task(ingestion.run(stop)))
                    tasks.append(asyncio.create_task(_replica(bus_a, parts, held).run(stop)))
                    async with asyncio.timeout(60):
                        await held.holding.wait()  # A has a batch between its reads and commit
                    replica_b = _replica(bus_b, parts, parts.facts(bus_b))
                    tasks.append(asyncio.create_task(replica_b.run(stop)))
                    await _until_rebalancing(noida_kafka_server.bootstrap)
                    held.release.set()  # A commits its batch while the group rebalances
                    await _settled(api_bus, parts, tasks)
                    stop.set()
                    await asyncio.gather(*tasks)  # each worker stops cleanly: none had failed
            finally:
                stop.set()
                held.release.set()
                await asyncio.gather(*tasks, return_exceptions=True)  # consumers close first
        refused = [e for e in logs if e["event"] == "consolidation_commit_failed"]
        assert refused, "no commit met the rebalance; the test proved nothing"
    finally:
        await parts.index.close()
        await parts.archive.close()


async def _retain_all(bus: KafkaEventBus, parts: Parts) -> None:
    """Acknowledge every statement (no wait: ingestion starts after)."""
    await bus.ensure_topics([*STAGE1_TOPICS, *CONSOLIDATION_TOPICS])
    service = MemoryService(
        bus=bus, archive=parts.archive, index=parts.index, embedder=parts.embedder
    )
    try:
        for i in range(len(NAMES) * len(ITEMS)):
            request = RetainRequest(content=_statement(i), memory_id=f"m-{i}")
            await service.retain(BANKS[i % len(BANKS)], request)
    finally:
        await service.drain()
