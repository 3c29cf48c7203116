"""The listing route end to end: ``GET /v1/banks/{bank}/memories?limit=100`` over a live stack.

Beside `make bench-list`'s index call, this times what a client waits for: the index
page, one archive read per memory and the JSON answer, through the real app
(in-process, ``httpx.ASGITransport``) over an embedded stack whose memories came in
through retain and ingestion (hash embedder).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from cogsub.api import ApiLimits, create_app
from cogsub.archive.filesystem import FilesystemArchive
from cogsub.bus.sqlite import SqliteEventBus
from cogsub.core.memory import RetainRequest
from cogsub.embeddings.hash import HashEmbedder
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.ingestion import IngestionWorker
from cogsub.recall import MemoryService

BANK = "listed"
PAGE = 100
START = datetime(2025, 1, 1, tzinfo=UTC)


async def api_pages(count: int, pages: int) -> list[float]:
    """Milliseconds per page of a walk from the newest of ``count`` retained memories."""
    with tempfile.TemporaryDirectory(prefix="cogsub-list-api-") as tmp:
        root = Path(tmp)
        bus = SqliteEventBus(root / "bus.sqlite3")
        archive = FilesystemArchive(root / "archive")
        index = SqliteMemoryIndex(root / "index.sqlite3")
        embedder = HashEmbedder()
        worker = IngestionWorker(
            bus=bus, archive=archive, index=index, embedder=embedder, poll_timeout_s=0.02
        )
        await worker.prepare()
        stop = asyncio.Event()
        running = asyncio.create_task(worker.run(stop))
        service = MemoryService(bus=bus, archive=archive, index=index, embedder=embedder)
        try:
            await _retained(service, index, count)
            app = create_app(service=service, auth=None, limits=ApiLimits(max_body_bytes=65_536))
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
                return await _walk(api, pages)
        finally:
            stop.set()
            await running
            await service.drain()
            await index.close()
            await archive.close()
            await bus.close()


async def _retained(service: MemoryService, index: SqliteMemoryIndex, count: int) -> None:
    for n in range(count):
        request = RetainRequest(
            content=f"memory {n}: a note about the billing deploy",
            memory_id=f"m{n:07d}",
            timestamp=START + timedelta(minutes=n),
        )
        await service.retain(BANK, request)
    while await index.count(BANK) < count:  # noqa: ASYNC110 - the index has no change feed
        await asyncio.sleep(0.1)
    print(f"  retained and indexed {count:,}", flush=True)


async def _walk(api: httpx.AsyncClient, pages: int) -> list[float]:
    times: list[float] = []
    params: dict[str, Any] = {"limit": PAGE}
    await api.get(f"/v1/banks/{BANK}/memories", params=params)  # warms the readers; not timed
    while len(times) < pages:
        began = time.perf_counter()
        response = await api.get(f"/v1/banks/{BANK}/memories", params=params)
        times.append((time.perf_counter() - began) * 1000)
        response.raise_for_status()
        cursor = response.json()["next_cursor"]
        params = {"limit": PAGE, **({"cursor": cursor} if cursor else {})}
    return times
