"""Writes spread over many banks tantivy indexes: caught up after every write, or once a second.

``--banks`` banks of ``--per-bank`` documents each (more than ``LARGE_BANK`` is scaled down
to ``--large-bank``, so every bank is indexed), then ``--batches`` upserts of ``--batch``
documents, each spread over every bank, timed one by one. Three runs on fresh files: the
FTS5 tables alone (the baseline), tantivy caught up after every write
(``text_catch_up_s=0``), and tantivy at the index's interval (``TEXT_CATCH_UP_S``). It
prints each run's p50 and max batch time and documents/s over all batches, and each tantivy
run's rate against the baseline's.

Run: ``.venv/bin/python -m benchmarks.large_bank_writes [--banks 40] [--json]``.
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
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.index.sqlite.index import TEXT_CATCH_UP_S

DIMENSION = 8
WORDS = [f"w{i}" for i in range(3_000)]


def document(rng: random.Random, number: int, bank: int) -> IndexDocument:
    return IndexDocument(
        event_id=f"e{number}",
        timestamp=f"2026-05-{1 + number % 28:02d}T12:00:00.000Z",
        event_type="observation",
        session_id="s",
        summary=" ".join(rng.choices(WORDS, k=30)),
        embedding=[rng.uniform(-1, 1) for _ in range(DIMENSION)],
        importance_score=0.5,
        reward_score=0.5,
        confidence=0.5,
        object_storage_key=f"events/{number}.json",
        tags=[],
        bank_id=f"bank-{bank:03d}",
    )


async def run(args: argparse.Namespace, engine: str, catch_up_s: float) -> dict[str, Any]:
    """Fill the banks, then time the spread batches; the run's figures."""
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="cogsub-writes-", dir=args.workdir) as tmp:
        index = SqliteMemoryIndex(
            Path(tmp) / "index.sqlite3",
            text_engine="tantivy" if engine != "fts5" else "fts5",
            large_bank=args.large_bank,
            text_catch_up_s=catch_up_s,
        )
        number = 0
        for bank in range(args.banks):
            await index.upsert([document(rng, number + i, bank) for i in range(args.per_bank)])
            number += args.per_bank
        times = []
        began = time.perf_counter()
        for _ in range(args.batches):
            batch = [document(rng, number + i, i % args.banks) for i in range(args.batch)]
            number += args.batch
            started = time.perf_counter()
            await index.upsert(batch)
            times.append((time.perf_counter() - started) * 1000)
        elapsed = time.perf_counter() - began
        await index.close()
    return {
        "run": engine,
        "text_catch_up_s": catch_up_s,
        "batch_p50_ms": round(statistics.median(times), 1),
        "batch_max_ms": round(max(times), 1),
        "documents_per_s": round(args.batches * args.batch / elapsed),
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    runs = [
        await run(args, "fts5", 0.0),
        await run(args, "tantivy, every write", 0.0),
        await run(args, "tantivy, interval", TEXT_CATCH_UP_S),
    ]
    baseline = runs[0]["documents_per_s"]
    for row in runs[1:]:
        row["rate_over_fts5"] = round(row["documents_per_s"] / baseline, 3)
    return {"banks": args.banks, "per_bank": args.per_bank, "batch": args.batch, "runs": runs}


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--banks", type=int, default=40)
    parser.add_argument("--per-bank", type=int, default=2_500)
    parser.add_argument("--large-bank", type=int, default=2_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    for name in ("banks", "batch", "batches"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.per_bank < args.large_bank:
        parser.error("--per-bank must be at least --large-bank: every bank is to be indexed")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    result = asyncio.run(measure(args))
    record("large_bank_writes", result, argv)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{args.batches} batches of {args.batch} over {args.banks} banks of {args.per_bank}")
    print("run | catch-up s | batch p50 / max ms | documents/s | rate / FTS5")
    print("--- | --- | --- | --- | ---")
    for row in result["runs"]:
        ratio = row.get("rate_over_fts5", "–")
        print(
            f"{row['run']} | {row['text_catch_up_s']} | {row['batch_p50_ms']} / "
            f"{row['batch_max_ms']} | {row['documents_per_s']} | {ratio}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
