"""`make bench-decay`: one epoch of decay over a bank, in the index, beside the old read-and-patch.

A bank of ``--documents`` memories with varied decay (as `make bench-round-read` builds it) is
indexed once and copied, so both passes start from the same data. Then, for ``--repeats`` epochs,
each copy is decayed one epoch:

- in the index, ``DECAY_PAGE`` memories a page (``MemoryIndex.decay_page``), as rounds do now;
- the pass it replaced: ``scan`` pages of 500 read out, each memory's new factor computed in
  Python, written back with ``update_many`` 5,000 at a time.

It prints the median time of each pass, the ratio (the baseline measured in the same run), and
whether both copies hold the same factors after every epoch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.results import record
from benchmarks.round_read import BANK, DIMENSION, documents
from cogsub.consolidation.decay_pass import DECAY_PAGE
from cogsub.index.ports import DecayStep, DocumentPatch, SearchFilters
from cogsub.index.sqlite import SqliteMemoryIndex

#: After every document's timestamp: the whole bank is old enough to decay.
STEP = DecayStep(rate=0.9, floor=0.05, before=datetime(2026, 6, 1, tzinfo=UTC))
SCAN_PAGE = 500
WRITE_EVERY = 5_000


async def in_the_index(index: SqliteMemoryIndex) -> int:
    decayed, after = 0, None
    while (page := await index.decay_page(BANK, STEP, size=DECAY_PAGE, after=after)).last:
        decayed, after = decayed + page.decayed, page.last
    return decayed


async def read_and_patched(index: SqliteMemoryIndex) -> int:
    """The old pass: every memory read out, its factor computed here, written back in bulk."""
    decayed, after = 0, None
    patches: dict[str, DocumentPatch] = {}
    while page := await index.scan(SearchFilters(bank_id=BANK), size=SCAN_PAGE, after=after):
        after = page[-1].event_id
        for doc in page:
            factor = STEP.applied_to(doc.decay_factor)
            if factor != doc.decay_factor:
                patches[doc.event_id] = DocumentPatch(decay_factor=factor)
        if len(patches) >= WRITE_EVERY:
            decayed += await index.update_many(BANK, patches)
            patches = {}
    return decayed + await index.update_many(BANK, patches)


async def factors(index: SqliteMemoryIndex) -> list[float]:
    found, after = [], None
    while page := await index.scan(SearchFilters(bank_id=BANK), size=SCAN_PAGE, after=after):
        found += [doc.decay_factor for doc in page]
        after = page[-1].event_id
    return found


async def timed(decay: Any, index: SqliteMemoryIndex) -> tuple[float, int]:
    started = time.perf_counter()
    decayed = await decay(index)
    return (time.perf_counter() - started) * 1000, decayed


async def measure(count: int, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cogsub-decay-") as tmp:
        built, copy = Path(tmp) / "built.sqlite3", Path(tmp) / "copy.sqlite3"
        index = SqliteMemoryIndex(built)
        await index.ensure(dimension=DIMENSION)
        docs = documents(count)
        for start in range(0, len(docs), 5_000):
            await index.upsert(docs[start : start + 5_000])
            print(f"  indexed {min(start + 5_000, count):,} of {count:,}", flush=True)
        await index.close()  # checkpoints: the file alone is the whole index
        shutil.copyfile(built, copy)
        ours, theirs = SqliteMemoryIndex(built), SqliteMemoryIndex(copy)
        try:
            passes: dict[str, list[float]] = {"index": [], "read_and_patch": []}
            same, decayed = True, 0
            for epoch in range(repeats):
                index_ms, decayed = await timed(in_the_index, ours)
                patch_ms, patched = await timed(read_and_patched, theirs)
                passes["index"].append(index_ms)
                passes["read_and_patch"].append(patch_ms)
                same = same and decayed == patched and await factors(ours) == await factors(theirs)
                print(f"  epoch {epoch + 1}: {decayed:,} decayed", flush=True)
        finally:
            await ours.close()
            await theirs.close()
    index_ms, patch_ms = (statistics.median(v) for v in passes.values())
    return {
        "documents": count,
        "decayed_last_epoch": decayed,
        "index_ms": round(index_ms, 1),
        "read_and_patch_ms": round(patch_ms, 1),
        "read_and_patch_over_index": round(patch_ms / index_ms, 1),
        "same_factors": same,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.documents, args.repeats))
    record("decay_pass", result, argv)
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"{result['documents']:,} memories: in the index {result['index_ms']} ms, "
            f"read and patched {result['read_and_patch_ms']} ms "
            f"({result['read_and_patch_over_index']}x), same factors: {result['same_factors']}"
        )
    return 0 if result["same_factors"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
