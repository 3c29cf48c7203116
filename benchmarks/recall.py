"""`make bench-recall`: recall latency on the embedded stack at 10,000 and 100,000 memories.

The bank is filled by bulk upserts (and archive writes) rather than through
ingestion, since this measures recall, not ingestion. Document vectors are
random unit vectors of MiniLM's dimension (exact search costs the same whatever
they hold); queries are embedded with MiniLM. Reported: p50/p95/p99 of
``MemoryService.recall`` excluding query embedding (vectors precomputed) and
including it (MiniLM live), and the resident memory the index added.
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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.results import record
from cogsub.archive.filesystem import FilesystemArchive
from cogsub.bus.memory import MemoryEventBus
from cogsub.core import IndexDocument, format_timestamp
from cogsub.core.memory import RecallRequest
from cogsub.embeddings.minilm import MiniLMEmbedder
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.recall import MemoryService

DIMENSION = 384
BANK = "bench-bank"


def _vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    syllables = ["ka", "lo", "mi", "ra", "ten", "vo", "shi", "na", "del", "or", "pe", "qu", "sa"]
    words = {"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(size)}
    return sorted(words)


def _text(rng: random.Random, vocab: Sequence[str]) -> str:
    # Zipf-like word choice: a few words are common, most are rare, as in real text.
    picks = [vocab[min(len(vocab) - 1, int(rng.paretovariate(1.1)) - 1)] for _ in range(4)]
    picks += rng.sample(vocab, 8)
    rng.shuffle(picks)
    return " ".join(picks).capitalize() + "."


def _unit_vectors(rng: np.random.Generator, count: int) -> np.ndarray:
    vectors = rng.standard_normal((count, DIMENSION)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _fill(index: SqliteMemoryIndex, archive: FilesystemArchive, count: int) -> None:
    rng = random.Random(11)
    vocab = _vocabulary(rng)
    vectors = _unit_vectors(np.random.default_rng(11), count)
    await index.ensure(dimension=DIMENSION)
    started = time.perf_counter()
    for start in range(0, count, 1000):
        docs, puts = [], []
        for i in range(start, min(count, start + 1000)):
            text = _text(rng, vocab)
            timestamp = format_timestamp(_time(i))
            key = f"events/{timestamp[:4]}/{timestamp[5:7]}/{timestamp[8:10]}/m{i:07d}.json"
            event = {
                "eventId": f"m{i:07d}",
                "timestamp": timestamp,
                "type": "user_input",
                "bankId": BANK,
                "input": {"text": text},
                "importanceScore": 0.5,
                "tags": [f"t{i % 20}"],
                "objectStorageKey": key,
            }
            puts.append(archive.put_once(key, json.dumps(event).encode()))
            docs.append(
                IndexDocument(
                    event_id=f"m{i:07d}",
                    timestamp=timestamp,
                    event_type="user_input",
                    session_id=f"s{i % 500}",
                    summary=text[:240],
                    embedding=vectors[i].tolist(),
                    importance_score=rng.random(),
                    reward_score=0.5,
                    confidence=0.5,
                    object_storage_key=key,
                    tags=[f"t{i % 20}"],
                    bank_id=BANK,
                    fact_type="world" if i % 3 else "experience",  # type: ignore[arg-type]
                )
            )
        await asyncio.gather(*puts)
        await index.upsert(docs)
        if start % 20_000 == 0:
            rate = (start + len(docs)) / (time.perf_counter() - started)
            print(f"  filled {start + len(docs)}/{count} ({rate:.0f}/s)", file=sys.stderr)


def _time(i: int) -> datetime:
    return datetime(2025, 1, 1, tzinfo=UTC) + timedelta(minutes=7 * i)


class _Precomputed:
    """An embedder that answers from vectors computed before timing (embedding excluded)."""

    name = "precomputed-minilm"
    dimension = DIMENSION

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self._vectors = vectors

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vectors[t] for t in texts]

    async def close(self) -> None:
        return None


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    cut = statistics.quantiles(ordered, n=100, method="inclusive")
    return {"p50_ms": round(cut[49], 2), "p95_ms": round(cut[94], 2), "p99_ms": round(cut[98], 2)}


async def _time_recalls(service: MemoryService, queries: Sequence[str]) -> dict[str, float]:
    for query in queries[:20]:
        await service.recall(BANK, RecallRequest(query=query))  # warm caches and the model
    samples = []
    for query in queries:
        started = time.perf_counter()
        await service.recall(BANK, RecallRequest(query=query, k=10))
        samples.append((time.perf_counter() - started) * 1000)
    await service.drain()
    return _percentiles(samples)


async def bench_size(count: int, queries: list[str], minilm: MiniLMEmbedder) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cogsub-recall-") as tmp:
        index = SqliteMemoryIndex(Path(tmp) / "index.sqlite3")
        archive = FilesystemArchive(Path(tmp) / "archive")
        await _fill(index, archive, count)
        before = _rss_mib()
        vectors = dict(zip(queries, await minilm.embed(queries), strict=True))
        common = {"bus": MemoryEventBus(), "archive": archive, "index": index}
        excluded = await _time_recalls(
            MemoryService(**common, embedder=_Precomputed(vectors)), queries
        )
        included = await _time_recalls(MemoryService(**common, embedder=minilm), queries)
        after = _rss_mib()
        await index.close()
        await archive.close()
    return {
        "memories": count,
        "queries": len(queries),
        "excluding_embedding": excluded,
        "including_minilm": included,
        "rss_after_recall_mib": round(after, 1),
        "rss_index_growth_mib": round(after - before, 1),
    }


def make_queries(count: int) -> list[str]:
    rng = random.Random(5)
    vocab = _vocabulary(random.Random(11))
    return [" ".join(rng.sample(vocab[:2000], rng.randint(3, 6))) for _ in range(count)]


async def main_async(sizes: Sequence[int], count: int) -> list[dict[str, Any]]:
    minilm = MiniLMEmbedder()
    rows = []
    try:
        for size in sizes:
            rows.append(await bench_size(size, make_queries(count), minilm))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        await minilm.close()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench-recall")
    parser.add_argument("--size", type=int, action="append", help="memories (repeatable)")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    rows = asyncio.run(main_async(args.size or [10_000, 100_000], args.queries))
    record("recall", rows, argv)
    print("memories | excl. embedding p50/p95/p99 ms | incl. MiniLM p50/p95/p99 ms | RSS MiB")
    print("--- | --- | --- | ---")
    for row in rows:
        ex, inc = row["excluding_embedding"], row["including_minilm"]
        print(
            f"{row['memories']} | {ex['p50_ms']} / {ex['p95_ms']} / {ex['p99_ms']} | "
            f"{inc['p50_ms']} / {inc['p95_ms']} / {inc['p99_ms']} | {row['rss_after_recall_mib']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
