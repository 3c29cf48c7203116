"""An embedded stack with a live ingestion worker, for recall tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from cogsub.archive.filesystem import FilesystemArchive
from cogsub.bus.sqlite import SqliteEventBus
from cogsub.embeddings.hash import HashEmbedder
from cogsub.embeddings.ports import Embedder
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.ingestion import IngestionWorker
from cogsub.recall import MemoryService, RankingPolicy


@dataclass
class LiveStack:
    service: MemoryService
    index: SqliteMemoryIndex
    bus: SqliteEventBus
    archive: FilesystemArchive


@contextlib.asynccontextmanager
async def live_stack(
    root: Path,
    *,
    embedder: Embedder | None = None,
    policy: RankingPolicy | None = None,
    text_pool: int = 75,
    vector_pool: int = 75,
) -> AsyncIterator[LiveStack]:
    bus = SqliteEventBus(root / "bus.sqlite3")
    archive = FilesystemArchive(root / "archive")
    index = SqliteMemoryIndex(root / "index.sqlite3")
    embedder = embedder or HashEmbedder()
    worker = IngestionWorker(
        bus=bus, archive=archive, index=index, embedder=embedder, poll_timeout_s=0.02
    )
    await worker.prepare()
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    service = MemoryService(
        bus=bus,
        archive=archive,
        index=index,
        embedder=embedder,
        policy=policy,
        text_pool=text_pool,
        vector_pool=vector_pool,
    )
    try:
        yield LiveStack(service=service, index=index, bus=bus, archive=archive)
    finally:
        stop.set()
        await running
        await service.drain()
        await index.close()
        await archive.close()
        await bus.close()
