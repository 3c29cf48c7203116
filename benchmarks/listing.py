"""`make bench-list`: a bank's memories newest first, a page of 100 at a time, in a large store.

The store is the embedded SQLite index alone, filled through ``MemoryIndex.upsert`` (no
ingestion, no archive): ``--bank`` memories in the bank listed and the rest of ``--store``
spread over ``--others`` banks, with cheap deterministic 8-d embeddings. The file is kept
under ``--workdir`` and reused by later runs with the same sizes, since building a million
documents takes minutes on a loaded machine.

Measured, each over ``--pages`` pages: a walk from the newest memory following the cursor,
pages from cursors spread through the whole bank (deep pages cost what the first do when
the keyset seeks), and the same walk filtered to one fact type; then ``bank_counts`` of the
bank. Each page is one ``list_newest`` call as the API makes it (``limit + 1`` documents).
The goal is a p95 of at most 20 ms a page. With ``--api-memories`` (default 10,000) the
route itself is timed too, end to end over a live stack (``benchmarks.listing_api``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.listing_api import api_pages
from benchmarks.results import record
from cogsub.core.documents import IndexDocument
from cogsub.core.events import FactType, format_timestamp
from cogsub.core.listing import ListingKey
from cogsub.index.ports import SearchFilters
from cogsub.index.sqlite import SqliteMemoryIndex

BANK = "listed"
DIMENSION = 8
PAGE = 100
GOAL_P95_MS = 20.0
BATCH = 5_000
START = datetime(2025, 1, 1, tzinfo=UTC)
TYPES = [FactType.WORLD, FactType.EXPERIENCE, FactType.OBSERVATION, FactType.PREFERENCE]


def documents(bank: str, count: int, seed: int) -> Iterator[IndexDocument]:
    """``count`` memories of ``bank`` over a year, some sharing a second (ties for the id)."""
    rng = random.Random(seed)
    for n in range(count):
        vector = [rng.uniform(-1.0, 1.0) for _ in range(DIMENSION)]
        norm = sum(v * v for v in vector) ** 0.5 or 1.0
        moment = START + timedelta(seconds=rng.randrange(365 * 86_400))
        event_id = f"{bank}-m{n:07d}"
        yield IndexDocument.model_construct(
            event_id=event_id,
            timestamp=format_timestamp(moment),
            event_type="user_input",
            session_id=f"{bank}-s{n // 20}",
            summary=f"memory {n} of {bank}: note {rng.randrange(10_000)}",
            embedding=[v / norm for v in vector],
            importance_score=0.5,
            reward_score=0.5,
            confidence=0.5,
            retrieval_count=0,
            decay_factor=1.0,
            object_storage_key=f"events/2025/01/01/banks/{bank}/{event_id}.json",
            tags=[f"t{n % 7}"],
            bank_id=bank,
            fact_type=TYPES[n % len(TYPES)],
        )


async def build(path: Path, store: int, bank: int, others: int) -> float:
    """Fill the index at ``path``; the seconds it took."""
    started = time.perf_counter()
    index = SqliteMemoryIndex(path)
    await index.ensure(dimension=DIMENSION)
    rest = store - bank
    plan = [(BANK, bank)] + [(f"other-{b:03d}", rest // others) for b in range(others)]
    done = 0
    try:
        for number, (name, count) in enumerate(plan):
            batch: list[IndexDocument] = []
            for doc in documents(name, count, seed=number):
                batch.append(doc)
                if len(batch) == BATCH:
                    await index.upsert(batch)
                    done, batch = done + len(batch), []
            if batch:
                await index.upsert(batch)
                done += len(batch)
            print(f"  indexed {done:,} of {store:,}", flush=True)
    finally:
        await index.close()
    return time.perf_counter() - started


async def timed_pages(
    page: Callable[[ListingKey | None], Awaitable[list[IndexDocument]]],
    starts: Sequence[ListingKey | None],
    follow: bool,
) -> list[float]:
    """Milliseconds per page: from each start, or (``follow``) a walk from the first."""
    times = []
    after = starts[0]
    for start in starts:
        began = time.perf_counter()
        found = await page(after if follow else start)
        times.append((time.perf_counter() - began) * 1000)
        if follow and found:
            last = found[PAGE - 1] if len(found) > PAGE else found[-1]
            after = ListingKey(last.timestamp, last.event_id)
    return times


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "pages": len(times),
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[max(0, round(0.95 * len(ordered)) - 1)], 2),
        "max_ms": round(ordered[-1], 2),
    }


async def measure(path: Path, pages: int) -> dict[str, Any]:
    index = SqliteMemoryIndex(path)
    try:
        everything = SearchFilters(bank_id=BANK)
        worlds = SearchFilters(bank_id=BANK, fact_types=frozenset({FactType.WORLD}))

        async def page(filters: SearchFilters, after: ListingKey | None) -> list[IndexDocument]:
            return await index.list_newest(filters, size=PAGE + 1, after=after)

        await page(everything, None)  # opens the readers; not timed
        spread = await _cursors(index, pages)
        walk = await timed_pages(lambda a: page(everything, a), [None] * pages, follow=True)
        deep = await timed_pages(lambda a: page(everything, a), spread, follow=False)
        typed = await timed_pages(lambda a: page(worlds, a), [None] * pages, follow=True)
        began = time.perf_counter()
        (counts,) = await index.bank_counts([BANK], size=1)
        counts_ms = (time.perf_counter() - began) * 1000
        total = await index.count()
    finally:
        await index.close()
    timings = {"walk": summary(walk), "deep": summary(deep), "one_type": summary(typed)}
    worst = max(found["p95_ms"] for found in timings.values())
    figures: dict[str, Any] = {
        "store": total,
        "bank": counts.total,
        "page": PAGE,
        **timings,
        "bank_counts_ms": round(counts_ms, 1),
        "goal_p95_ms": GOAL_P95_MS,
        "met": worst <= GOAL_P95_MS,
    }
    return figures


async def _cursors(index: SqliteMemoryIndex, count: int) -> list[ListingKey | None]:
    """``count`` cursors spread evenly through the bank (sampled from a scan by id)."""
    sampled: list[ListingKey | None] = []
    after: str | None = None
    stride = max(1, (await index.count(BANK)) // count)
    while len(sampled) < count:
        found = await index.scan(SearchFilters(bank_id=BANK), size=stride, after=after)
        if not found:
            break
        sampled.append(ListingKey(found[0].timestamp, found[0].event_id))
        after = found[-1].event_id
    random.Random(1).shuffle(sampled)
    return sampled or [None]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=int, default=1_000_000)
    parser.add_argument("--bank", type=int, default=100_000)
    parser.add_argument("--others", type=int, default=90)
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--workdir", type=Path, default=Path(".bench"))
    parser.add_argument(
        "--api-memories",
        type=int,
        default=10_000,
        help="also time the route end to end over a live stack of this many (0: skip)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    path = args.workdir / f"listing-{args.store}-{args.bank}-{args.others}.sqlite3"
    built_s = None
    if not path.exists():
        args.workdir.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        for leftover in args.workdir.glob(f"{partial.name}*"):
            leftover.unlink()  # a build stopped half-way starts again
        built_s = asyncio.run(build(partial, args.store, args.bank, args.others))
        partial.rename(path)
    figures = asyncio.run(measure(path, args.pages))
    figures["build_s"] = round(built_s, 1) if built_s is not None else None
    if args.api_memories:
        walk = asyncio.run(api_pages(args.api_memories, min(args.pages, args.api_memories // PAGE)))
        figures["api"] = {"memories": args.api_memories, **summary(walk)}
    record("listing", figures, argv)
    if args.json:
        print(json.dumps(figures))
    else:
        for name in ("walk", "deep", "one_type"):
            found = figures[name]
            print(
                f"{name}: p50 {found['p50_ms']} ms, p95 {found['p95_ms']} ms,"
                f" max {found['max_ms']} ms over {found['pages']} pages of {PAGE}"
            )
        if "api" in figures:
            api = figures["api"]
            print(
                f"the route over a live stack of {api['memories']:,}: p50 {api['p50_ms']} ms,"
                f" p95 {api['p95_ms']} ms (index page, archive reads, JSON)"
            )
        print(
            f"bank of {figures['bank']:,} in a store of {figures['store']:,}:"
            f" bank_counts {figures['bank_counts_ms']} ms;"
            f" goal p95 <= {GOAL_P95_MS} ms: {'met' if figures['met'] else 'not met'}"
        )
    return 0 if figures["met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
