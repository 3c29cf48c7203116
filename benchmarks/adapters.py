"""`make bench-adapters`: the embedded adapters' raw rates, each beside its own baseline.

- SQLite log: 10,000 concurrent publishes (group commit) vs 500 publishes awaited one at a time.
- Filesystem archive: 2,000 concurrent 2 KB ``put_once`` with the group ``syncfs`` vs with an
  fsync per file and directory.
- MiniLM: texts/s one at a time vs in batches of 64, on the same short texts.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.results import record
from cogsub.archive.filesystem import FilesystemArchive
from cogsub.bus.sqlite import SqliteEventBus
from cogsub.core import TopicSpec
from cogsub.embeddings.minilm import MiniLMEmbedder


async def sqlite_log(root: Path) -> dict[str, float]:
    bus = SqliteEventBus(root / "bus.sqlite3")
    try:
        await bus.ensure_topics([TopicSpec("bench", 12)])
        started = time.perf_counter()
        await asyncio.gather(*(bus.publish("bench", b"x" * 200) for _ in range(10_000)))
        concurrent = 10_000 / (time.perf_counter() - started)
        started = time.perf_counter()
        for _ in range(500):
            await bus.publish("bench", b"x" * 200)
        serial = 500 / (time.perf_counter() - started)
    finally:
        await bus.close()
    return {"concurrent_publishes_per_s": round(concurrent), "one_at_a_time_per_s": round(serial)}


async def filesystem_archive(root: Path) -> dict[str, float]:
    rates = {}
    for group_sync in (True, False):
        archive = FilesystemArchive(root / f"archive-{group_sync}", group_sync=group_sync)
        try:
            started = time.perf_counter()
            await asyncio.gather(
                *(
                    archive.put_once(f"events/2026/05/08/e{i}.json", b"x" * 2048)
                    for i in range(2000)
                )
            )
            name = "group_syncfs_puts_per_s" if group_sync else "fsync_per_file_puts_per_s"
            rates[name] = round(2000 / (time.perf_counter() - started))
        finally:
            await archive.close()
    return rates


def minilm() -> dict[str, float]:
    embedder = MiniLMEmbedder()
    texts = [f"How do I deploy the billing service, attempt {i}?" for i in range(640)]
    embedder.embed_sync(texts[:64])  # load the model outside the timing
    started = time.perf_counter()
    for text in texts[:200]:
        embedder.embed_sync([text])
    single = 200 / (time.perf_counter() - started)
    started = time.perf_counter()
    for start in range(0, len(texts), 64):
        embedder.embed_sync(texts[start : start + 64])
    batched = len(texts) / (time.perf_counter() - started)
    return {"one_at_a_time_texts_per_s": round(single), "batches_of_64_texts_per_s": round(batched)}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="cogsub-bench-") as tmp:
        figures: dict[str, Any] = {
            "sqlite_log": asyncio.run(sqlite_log(Path(tmp))),
            "filesystem_archive": asyncio.run(filesystem_archive(Path(tmp))),
            "minilm": minilm(),
        }
    print(json.dumps(figures, indent=2))
    record("adapters", figures, [])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
