"""An embedded stack with a live ingestion worker and the consolidation parts, for tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cogsub.archive.filesystem import FilesystemArchive
from cogsub.archive.ports import ArchiveStore
from cogsub.bus.sqlite import SqliteEventBus
from cogsub.consolidation import ConsolidationPolicy, ConsolidationRound, DerivedWriter, FactStage
from cogsub.core.derived import is_superseded
from cogsub.core.events import FactType
from cogsub.core.memory import RetainRequest
from cogsub.core.topics import CONSOLIDATION_TOPICS
from cogsub.embeddings.hash import HashEmbedder
from cogsub.extraction.offline import OfflineExtractor
from cogsub.extraction.ports import FactExtractor
from cogsub.index.ports import MemoryIndex, SearchFilters
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.ingestion import IngestionWorker
from cogsub.recall import MemoryService

NOW = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)


@dataclass
class ConsolidationStack:
    service: MemoryService
    index: SqliteMemoryIndex
    archive: FilesystemArchive
    bus: SqliteEventBus
    embedder: HashEmbedder
    writer: DerivedWriter
    rounds: ConsolidationRound
    facts: FactStage

    def round_over(self, index: MemoryIndex, archive: ArchiveStore) -> ConsolidationRound:
        """A round whose writes go through ``index`` and ``archive`` (fault-injecting wrappers)."""
        writer = DerivedWriter(bus=self.bus, archive=archive, index=index, embedder=self.embedder)
        return ConsolidationRound(
            archive=archive,
            index=index,
            writer=writer,
            policy=self.rounds.policy,
            clock=lambda: NOW,
        )


@contextlib.asynccontextmanager
async def consolidation_stack(
    root: Path,
    *,
    extractor: FactExtractor | None = None,
    policy: ConsolidationPolicy | None = None,
    clock: Callable[[], datetime] = lambda: NOW,
) -> AsyncIterator[ConsolidationStack]:
    bus = SqliteEventBus(root / "bus.sqlite3")
    archive = FilesystemArchive(root / "archive")
    index = SqliteMemoryIndex(root / "index.sqlite3")
    embedder = HashEmbedder()
    worker = IngestionWorker(
        bus=bus, archive=archive, index=index, embedder=embedder, poll_timeout_s=0.02
    )
    await worker.prepare()
    await bus.ensure_topics(CONSOLIDATION_TOPICS)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    service = MemoryService(bus=bus, archive=archive, index=index, embedder=embedder, clock=clock)
    writer = DerivedWriter(bus=bus, archive=archive, index=index, embedder=embedder)
    rounds = ConsolidationRound(
        archive=archive, index=index, writer=writer, policy=policy, clock=clock
    )
    facts = FactStage(
        archive=archive,
        index=index,
        embedder=embedder,
        extractor=extractor or OfflineExtractor(),
        writer=writer,
        semantic=False,
    )
    try:
        yield ConsolidationStack(service, index, archive, bus, embedder, writer, rounds, facts)
    finally:
        stop.set()
        await running
        await service.drain()
        await index.close()
        await archive.close()
        await bus.close()


def ops_memory(days: int, content: str, fact_type: FactType | None, **fields: Any) -> RetainRequest:
    """A memory of the ops bank ``days`` before NOW, with the same id in every stack."""
    return RetainRequest(
        memory_id=f"m-{days}",  # the same ids in every stack, so derived ids match too
        content=content,
        fact_type=fact_type,
        timestamp=NOW - timedelta(days=days),
        wait=True,
        **fields,
    )


async def seed_ops_bank(stack: ConsolidationStack, bank: str) -> None:
    """A procedure, a correction naming its step, two conflicting preferences, a pattern."""
    steps = ["make build", "kubectl rollout restart deployment/api", "curl /health"]
    retain = stack.service.retain
    await retain(bank, ops_memory(20, "Deploy the api", FactType.PROCEDURE, steps=steps))
    await retain(bank, ops_memory(10, "No — drain the pod before restart.", FactType.CORRECTION))
    await retain(
        bank, ops_memory(9, "No — use the blue dashboard for incidents.", FactType.CORRECTION)
    )
    await retain(bank, ops_memory(8, "For incidents, use the red dashboard.", FactType.PREFERENCE))
    for day in (7, 6, 5):
        await retain(
            bank,
            ops_memory(day, "The api team ships on Tuesdays.", FactType.WORLD, tags=[f"d{day}"]),
        )


async def live_observations(index: MemoryIndex, bank_id: str) -> set[str]:
    """The ids of ``bank_id``'s observations no other one supersedes (up to 100)."""
    filters = SearchFilters(bank_id=bank_id, fact_types=frozenset({FactType.OBSERVATION}))
    return {d.event_id for d in await index.scan(filters, size=100) if not is_superseded(d)}
