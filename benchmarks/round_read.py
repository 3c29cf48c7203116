"""`make bench-round-read`: a consolidation round's read of its slice, beside the old walk.

A bank of ``--documents`` world and experience memories with varied decay and
importance goes into a fresh SQLite index. Then, alternately:

- the slice read (``scan_in_replay_order``, ``max_scan + 1`` memories), which rounds use now;
- the walk it replaced (``scan`` over the whole bank, then the sort by replay order).

It prints the median of each, the ratio (the baseline measured in the same run), and whether both
found the same memories.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.results import record
from cogsub.core.documents import IndexDocument
from cogsub.core.events import FactType
from cogsub.index.ports import SearchFilters, replay_order
from cogsub.index.sqlite import SqliteMemoryIndex

BANK = "bench"
DIMENSION = 8
PAGE = 500
FACTS = frozenset({FactType.WORLD, FactType.EXPERIENCE})


def documents(count: int, seed: int = 7) -> list[IndexDocument]:
    rng = random.Random(seed)
    return [
        IndexDocument(
            event_id=f"m-{i:07d}",
            timestamp="2026-05-08T12:00:00.000Z",
            event_type="user_input",
            session_id=f"s-{i % 97}",
            summary=f"memory {i} about topic {i % 53}",
            embedding=[rng.uniform(-1, 1) for _ in range(DIMENSION)],
            importance_score=round(rng.random(), 3),
            reward_score=0.5,
            confidence=0.5,
            decay_factor=rng.choice([1.0, 0.9, 0.81, 0.729, 0.5, 0.05]),
            object_storage_key=f"events/2026/05/08/m-{i:07d}.json",
            tags=[],
            bank_id=BANK,
            fact_type=FactType.WORLD if i % 3 else FactType.EXPERIENCE,
        )
        for i in range(count)
    ]


async def walked(index: SqliteMemoryIndex, max_scan: int) -> list[str]:
    """The round's old read: every memory of the types, sorted, the first ``max_scan``."""
    found: list[IndexDocument] = []
    after: str | None = None
    filters = SearchFilters(bank_id=BANK, fact_types=FACTS)
    while page := await index.scan(filters, size=PAGE, after=after):
        found += page
        after = page[-1].event_id
    found.sort(key=replay_order)
    return [doc.event_id for doc in found[:max_scan]]


async def sliced(index: SqliteMemoryIndex, max_scan: int) -> list[str]:
    filters = SearchFilters(bank_id=BANK, fact_types=FACTS)
    page = await index.scan_in_replay_order(filters, size=max_scan + 1)
    return [doc.event_id for doc in page[:max_scan]]


async def timed(read: Any, index: SqliteMemoryIndex, max_scan: int) -> tuple[float, list[str]]:
    started = time.perf_counter()
    ids = await read(index, max_scan)
    return (time.perf_counter() - started) * 1000, ids


async def measure(count: int, max_scan: int, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cogsub-round-read-") as tmp:
        index = SqliteMemoryIndex(Path(tmp) / "index.sqlite3")
        try:
            await index.ensure(dimension=DIMENSION)
            docs = documents(count)
            for start in range(0, len(docs), 5_000):
                await index.upsert(docs[start : start + 5_000])
                print(f"  indexed {min(start + 5_000, count):,} of {count:,}", flush=True)
            walks: list[float] = []
            slices: list[float] = []
            same = True
            for _ in range(repeats):
                walk_ms, walk_ids = await timed(walked, index, max_scan)
                slice_ms, slice_ids = await timed(sliced, index, max_scan)
                walks.append(walk_ms)
                slices.append(slice_ms)
                same = same and walk_ids == slice_ids
        finally:
            await index.close()
    walk, piece = statistics.median(walks), statistics.median(slices)
    return {
        "documents": count,
        "max_scan": max_scan,
        "walk_ms": round(walk, 1),
        "slice_ms": round(piece, 1),
        "walk_over_slice": round(walk / piece, 1),
        "same_memories": same,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=50_000)
    parser.add_argument("--max-scan", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.documents, args.max_scan, args.repeats))
    record("round_read", result, argv)
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"{result['documents']:,} memories, slice of {result['max_scan']:,}: "
            f"walk {result['walk_ms']} ms, slice {result['slice_ms']} ms "
            f"({result['walk_over_slice']}x), same memories: {result['same_memories']}"
        )
    return 0 if result["same_memories"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
