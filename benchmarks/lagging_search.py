"""Text searches of a large bank while it is written: FTS5 alone, or tantivy lagging behind.

One bank of ``--documents`` documents (words drawn Zipf-like from a vocabulary, so queries
mix common and rare words), then ``--batches`` upserts of ``--batch`` new documents to it,
each followed by ``--searches`` text searches (top 50 of two or three words), timed one by
one, then the retrieval counts of each search's first ten hits written, as recall's feedback
does (older rows the index must leave out until it catches up; ``--no-feedback``: none).
Three runs on fresh files: the FTS5 tables alone (the baseline), tantivy at the index's
catch-up interval (``TEXT_CATCH_UP_S``: the searches come within it, so its index lags the
rows just written, which FTS5 scores beside it), and tantivy caught up after every write
(level, the writes paying a commit each). It prints each run's search p50 / p95 and
batch p50, and the tantivy runs' search p95 against the baseline's.

Run: ``.venv/bin/python -m benchmarks.lagging_search [--documents 100000] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.results import record
from cogsub.core import IndexDocument
from cogsub.index.ports import DocumentPatch, SearchFilters
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.index.sqlite.index import TEXT_CATCH_UP_S

DIMENSION = 8
BANK = "bank"
WORDS = [f"w{i}" for i in range(5_000)]
WEIGHTS = [1.0 / (rank + 1) for rank in range(len(WORDS))]
RETURNED = DocumentPatch(retrieval_count_increment=1)


def document(rng: random.Random, number: int) -> IndexDocument:
    return IndexDocument(
        event_id=f"e{number}",
        timestamp=f"2026-05-{1 + number % 28:02d}T12:00:00.000Z",
        event_type="observation",
        session_id="s",
        summary=" ".join(rng.choices(WORDS, WEIGHTS, k=25)),
        embedding=[rng.uniform(-1, 1) for _ in range(DIMENSION)],
        importance_score=0.5,
        reward_score=0.5,
        confidence=0.5,
        object_storage_key=f"events/{number}.json",
        tags=[],
        bank_id=BANK,
    )


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def run(args: argparse.Namespace, engine: str, catch_up_s: float) -> dict[str, Any]:
    """Fill the bank, then write and search it in turn; the run's figures."""
    rng = random.Random(11)
    queries = [" ".join(rng.choices(WORDS, WEIGHTS, k=rng.randint(2, 3))) for _ in range(97)]
    with tempfile.TemporaryDirectory(prefix="cogsub-lagging-", dir=args.workdir) as tmp:
        index = SqliteMemoryIndex(
            Path(tmp) / "index.sqlite3",
            text_engine="tantivy" if engine != "fts5" else "fts5",
            large_bank=min(args.documents, 20_000),
            text_catch_up_s=catch_up_s,
        )
        for start in range(0, args.documents, 5_000):
            end = min(args.documents, start + 5_000)
            await index.upsert([document(rng, n) for n in range(start, end)])
        number, searches, batches = args.documents, [], []
        filters = SearchFilters(bank_id=BANK)
        for turn in range(args.batches):
            started = time.perf_counter()
            await index.upsert([document(rng, number + i) for i in range(args.batch)])
            batches.append((time.perf_counter() - started) * 1000)
            number += args.batch
            returned: dict[str, DocumentPatch] = {}
            for asked in range(args.searches):
                query = queries[(turn * args.searches + asked) % len(queries)]
                started = time.perf_counter()
                hits = await index.search_text(query, filters, size=50)
                searches.append((time.perf_counter() - started) * 1000)
                returned.update({hit.document.event_id: RETURNED for hit in hits[:10]})
            if args.feedback:  # as recall counts what it returned: older rows written again
                await index.update_many(BANK, returned)
        await index.close()
    return {
        "run": engine,
        "text_catch_up_s": catch_up_s,
        "search_p50_ms": round(percentile(searches, 0.50), 2),
        "search_p95_ms": round(percentile(searches, 0.95), 2),
        "batch_p50_ms": round(statistics.median(batches), 1),
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    runs = [
        await run(args, "fts5", 0.0),
        await run(args, "tantivy, lagging (interval)", TEXT_CATCH_UP_S),
        await run(args, "tantivy, level (every write)", 0.0),
    ]
    baseline = runs[0]["search_p95_ms"]
    for row in runs[1:]:
        row["search_p95_over_fts5"] = round(row["search_p95_ms"] / baseline, 3)
    return {
        "documents": args.documents,
        "batch": args.batch,
        "batches": args.batches,
        "searches_per_batch": args.searches,
        "feedback": args.feedback,
        "runs": runs,
    }


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--searches", type=int, default=4, help="searches after each batch")
    parser.add_argument(
        "--no-feedback",
        dest="feedback",
        action="store_false",
        help="leave out the retrieval counts of each batch's first ten hits a search",
    )
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    for name in ("documents", "batch", "batches", "searches"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    result = asyncio.run(measure(args))
    record("lagging_search", result, argv)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"one bank of {args.documents}; {args.batches} batches of {args.batch}, "
        f"{args.searches} searches after each"
    )
    print("run | catch-up s | search p50 / p95 ms | batch p50 ms | search p95 / FTS5")
    print("--- | --- | --- | --- | ---")
    for row in result["runs"]:
        ratio = row.get("search_p95_over_fts5", "–")
        print(
            f"{row['run']} | {row['text_catch_up_s']} | {row['search_p50_ms']} / "
            f"{row['search_p95_ms']} | {row['batch_p50_ms']} | {ratio}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
