"""A durable embedded stack for worker tests, reopened as a restarted process would."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cogsub.archive.filesystem import FilesystemArchive
from cogsub.bus.middleware import Middleware
from cogsub.bus.ports import Record
from cogsub.bus.sqlite import SqliteEventBus
from cogsub.core import (
    EVENTS_PREFIX,
    EXPERIENCE_RAW,
    EXPERIENCE_RAW_DLQ,
    MEMORY_INDEXED,
    STAGE1_TOPICS,
)
from cogsub.embeddings.hash import HashEmbedder
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.ingestion import IngestionWorker, RetryPolicy, StageObserver


def event_body(i: int, *, text: str | None = None, bank: str = "bank-a") -> dict[str, Any]:
    return {
        "eventId": f"ev-{i:05d}",
        "timestamp": f"2026-05-{1 + i % 28:02d}T10:00:00.000Z",
        "type": "tool_result" if i % 2 else "user_input",
        "bankId": bank,
        "context": {"sessionId": f"s-{i % 3}"},
        "input": {"text": text or f"event number {i} about deploying service {i % 7}"},
        "action": {"tool": "shell", "reasoning": f"secret reasoning {i}"},
        "result": {"output": f"tool output {i}", "success": i % 3 != 0},
        "tags": ["t", f"g{i % 4}"],
    }


@dataclass
class Harness:
    root: Path
    batch_size: int = 8
    opened: list[Any] = field(default_factory=list)

    def bus(self) -> SqliteEventBus:
        bus = SqliteEventBus(self.root / "bus.sqlite3")
        self.opened.append(bus)
        return bus

    def worker(
        self,
        *,
        observer: StageObserver | None = None,
        bus: Any = None,
        wrap_archive: Callable[[Any], Any] = lambda archive: archive,
        wrap_index: Callable[[Any], Any] = lambda index: index,
        retry: RetryPolicy | None = None,
        finishing_depth: int = 2,
        middlewares: Sequence[Middleware] = (),
    ) -> IngestionWorker:
        archive = FilesystemArchive(self.root / "archive")
        index = SqliteMemoryIndex(self.root / "index.sqlite3")
        self.opened += [archive, index]
        return IngestionWorker(
            bus=bus or self.bus(),
            archive=wrap_archive(archive),
            retry=retry,
            index=wrap_index(index),
            embedder=HashEmbedder(),
            batch_size=self.batch_size,
            poll_timeout_s=0.05,
            observer=observer,
            finishing_depth=finishing_depth,
            middlewares=middlewares,
        )

    async def publish(self, bodies: Sequence[bytes | dict[str, Any]]) -> None:
        bus = self.bus()
        await bus.ensure_topics(STAGE1_TOPICS)
        for body in bodies:
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            await bus.publish(EXPERIENCE_RAW, raw)

    async def drain(self, worker: IngestionWorker, bus: SqliteEventBus) -> None:
        """Process until the group has committed everything on experience.raw."""
        await worker.prepare()
        consumer = bus.consumer([EXPERIENCE_RAW], group="ingestion")
        try:
            while (await bus.topic_stats(EXPERIENCE_RAW, group="ingestion")).lag > 0:
                records = await consumer.poll(max_records=self.batch_size, timeout_s=0.2)
                if records:
                    await worker.process(records, consumer)
        finally:
            await consumer.close()

    async def read_topic(self, topic: str) -> list[Record]:
        bus = self.bus()
        consumer = bus.consumer([topic], group=f"reader-{len(self.opened)}")
        found: list[Record] = []
        while batch := await consumer.poll(max_records=1000, timeout_s=0.1):
            found += batch
        await consumer.close()
        return found

    async def archived_keys(self) -> list[str]:
        archive = FilesystemArchive(self.root / "archive")
        self.opened.append(archive)
        return [key async for key in archive.list(EVENTS_PREFIX)]

    def index(self) -> SqliteMemoryIndex:
        index = SqliteMemoryIndex(self.root / "index.sqlite3")
        self.opened.append(index)
        return index

    async def indexed_ids(self, bank: str = "bank-a") -> int:
        return await self.index().count(bank)

    async def announced(self) -> set[str]:
        return {json.loads(r.value)["eventId"] for r in await self.read_topic(MEMORY_INDEXED)}

    async def dead_letters(self) -> list[Record]:
        return await self.read_topic(EXPERIENCE_RAW_DLQ)

    async def close(self) -> None:
        for item in reversed(self.opened):
            await item.close()
        self.opened.clear()
