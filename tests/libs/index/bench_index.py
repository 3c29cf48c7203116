"""Benchmark of SqliteMemoryIndex (not a test; pytest does not collect it).

Run: ``.venv/bin/python -m tests.libs.index.bench_index [--docs 100000] [--dimension 384]
[--text-engine fts5|tantivy]``

Loads one bank with synthetic documents, then reports upsert throughput in
batches of 500, the first (cold) vector search, p50/p95 latency of vector and
text search through the async API, recall feedback's retrieval-count flush, and
memory use. Two corpora:

- ``--corpus locomo``: words drawn with the frequencies of the LoCoMo dev
  conversations (``../shared/datasets/locomo-dev``). Pessimistic for BM25: a
  two-person chat has ~3k distinct words, so at 100k documents every content
  word (names included) is in 1-15% of them.
- ``--corpus zipf``: English stop words as the head of a 60k-word Zipf (s=1)
  vocabulary, about what 2.5M tokens of real text hold (Heaps' law).

Text queries are 3-5 words drawn from the same distribution: content words only,
any words, or stop words only (the worst case: every term is in most documents,
and they are searched because nothing else is left); for LoCoMo also the first
five words of its questions.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import resource
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from cogsub.core import FactType, IndexDocument
from cogsub.index import STOP_WORDS, SearchFilters, SqliteMemoryIndex, tokenize
from cogsub.index.ports import DocumentPatch
from cogsub.index.sqlite.index import TEXT_ENGINES, TextEngineName

LOCOMO = Path(__file__).resolve().parents[3].parent / "shared/datasets/locomo-dev/locomo-dev.json"
BANK = "bench"
BATCH = 500
START = datetime(2025, 1, 1, tzinfo=UTC)


def vocabulary(corpus: str) -> tuple[list[str], list[float], list[str]]:
    """Words, their weights, and natural questions (empty for the Zipf corpus)."""
    if corpus == "locomo":
        if not LOCOMO.exists():
            raise SystemExit(f"{LOCOMO} is missing; use --corpus zipf")
        samples = json.loads(LOCOMO.read_text())
        counts: Counter[str] = Counter()
        questions: list[str] = []
        for sample in samples:
            for key, turns in sample["conversation"].items():
                if key.startswith("session_") and isinstance(turns, list):
                    for turn in turns:
                        counts.update(tokenize(turn["text"]))
            questions.extend(qa["question"] for qa in sample["qa"])
        words = list(counts)
        return words, [float(counts[word]) for word in words], questions
    words = sorted(STOP_WORDS) + [f"w{rank}" for rank in range(60_000)]
    return words, [1.0 / (rank + 1) for rank in range(len(words))], []


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_pressure() -> str:
    """The kernel's CPU pressure (share of time some task waited for a CPU), for context."""
    try:
        return Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except OSError:
        return "n/a"


def percentiles(samples: list[tuple[float, float]]) -> str:
    def p95(values: list[float]) -> float:
        return sorted(values)[min(len(values) - 1, round(0.95 * (len(values) - 1)))]

    wall = [sample[0] for sample in samples]
    cpu = [sample[1] for sample in samples]
    return (
        f"wall p50 {statistics.median(wall):6.2f} p95 {p95(wall):6.2f} ms | "
        f"cpu p50 {statistics.median(cpu):6.2f} p95 {p95(cpu):6.2f} ms"
    )


async def timed(calls: list[Callable[[], Awaitable[object]]]) -> list[tuple[float, float]]:
    """Wall time and process CPU time (all threads: worker and BLAS) of each call, in ms."""
    samples = []
    for call in calls:
        began, began_cpu = time.perf_counter(), time.process_time()
        await call()
        samples.append(
            ((time.perf_counter() - began) * 1000, (time.process_time() - began_cpu) * 1000)
        )
    return samples


async def main(
    docs: int, dimension: int, path: str, corpus: str, text_engine: TextEngineName = "tantivy"
) -> None:
    rng = random.Random(7)
    np_rng = np.random.default_rng(7)
    words, weights, questions = vocabulary(corpus)
    cumulative = list(itertools.accumulate(weights))  # choices() would sum 60k weights per call
    facts = list(FactType)
    tags = ["deploy", "billing", "travel", "family", "health", "work", "music", "food"]
    index = SqliteMemoryIndex(path, text_engine=text_engine)
    await index.ensure(dimension=dimension)
    rss_start = rss_mb()
    upsert_seconds = upsert_cpu = 0.0
    existing = await index.count(BANK)
    batch: list[IndexDocument] = []
    for start in range(existing, docs, BATCH):
        vectors = np_rng.standard_normal((min(BATCH, docs - start), dimension), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        batch = [
            IndexDocument(
                event_id=f"ev-{start + i}",
                timestamp=(START + timedelta(minutes=start + i)).isoformat(),
                event_type="user_input",
                session_id=f"s{(start + i) // 50}",
                summary=" ".join(rng.choices(words, cum_weights=cumulative, k=rng.randint(8, 40)))[
                    :240
                ],
                embedding=vector.tolist(),
                importance_score=rng.random(),
                reward_score=0.5,
                confidence=0.5,
                object_storage_key=f"events/x/ev-{start + i}.json",
                tags=rng.sample(tags, rng.randint(0, 2)),
                bank_id=BANK,
                fact_type=rng.choice(facts),
            )
            for i, vector in enumerate(vectors)
        ]
        began, began_cpu = time.perf_counter(), time.process_time()
        await index.upsert(batch)
        upsert_seconds += time.perf_counter() - began
        upsert_cpu += time.process_time() - began_cpu
    print(f"documents {docs} x {dimension}-d, one bank, {corpus} corpus, file {path}")
    if upsert_seconds:
        rate, cpu_rate = (docs - existing) / upsert_seconds, (docs - existing) / upsert_cpu
        print(f"upsert   {rate:8.0f} docs/s in batches of {BATCH} ({cpu_rate:.0f} per CPU-second)")
    # A retain's own write: one document, its text changed, awaited before the next.
    samples = await timed(
        [
            lambda d=d: index.upsert([d.model_copy(update={"summary": f"{d.summary} again"})])  # type: ignore[misc]
            for d in batch[:50]
        ]
    )
    if samples:
        print(f"upsert of one document, one at a time  {percentiles(samples)}")

    queries = np_rng.standard_normal((200, dimension), dtype=np.float32)
    began = time.perf_counter()
    await index.search_vector(queries[0].tolist(), SearchFilters(bank_id=BANK), size=10)
    print(f"first vector search (builds the matrix) {(time.perf_counter() - began) * 1000:.0f} ms")
    plain = SearchFilters(bank_id=BANK)
    filtered = SearchFilters(
        bank_id=BANK,
        fact_types=frozenset({FactType.WORLD, FactType.EXPERIENCE}),
        tags_any=frozenset({"deploy", "travel"}),
        since=START + timedelta(days=10),
        min_importance=0.3,
    )
    for name, filters in (("no filter", plain), ("4 filters", filtered)):
        samples = await timed(
            [
                lambda q=q, f=filters: index.search_vector(q.tolist(), f, size=10)  # type: ignore[misc]
                for q in queries
            ]
        )
        print(f"search_vector size=10 {name:9}  {percentiles(samples)}")

    def sample(count: int, keep: Callable[[str], bool]) -> list[str]:
        queries: list[str] = []
        while len(queries) < count:
            size = rng.randint(3, 5)
            drawn = [w for w in rng.choices(words, cum_weights=cumulative, k=4 * size) if keep(w)]
            if len(drawn) >= size:
                queries.append(" ".join(drawn[:size]))
        return queries

    query_sets = {
        "3-5 content words": sample(200, lambda word: word not in STOP_WORDS),
        "3-5 any words    ": sample(200, lambda word: True),
        "3-5 stop words   ": sample(50, lambda word: word in STOP_WORDS),
        "LoCoMo questions ": [" ".join(q.split()[:5]) for q in questions[:200]],
    }
    for name, texts in query_sets.items():
        if not texts:
            continue
        for filters in (plain, filtered):
            samples = await timed(
                [
                    lambda t=t, f=filters: index.search_text(t, f, size=10)  # type: ignore[misc]
                    for t in texts
                ]
            )
            label = "no filter" if filters is plain else "4 filters"
            print(f"search_text  size=10 {name} {label:9}  {percentiles(samples)}")

    # What recall's feedback writes every half second: a count increment for each memory
    # returned meanwhile (services/cogsub/recall/feedback.py), 500 of them a flush.
    counted = DocumentPatch(retrieval_count_increment=1)
    flushes = [{f"ev-{rng.randrange(docs)}": counted for _ in range(500)} for _ in range(20)]
    samples = await timed(
        [lambda p=p: index.update_many(BANK, p) for p in flushes]  # type: ignore[misc]
    )
    print(f"retrieval-count flush of ~500         {percentiles(samples)}")

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    vectors_bytes = index._vectors.nbytes if index._vectors is not None else 0  # noqa: SLF001
    print(f"cpu pressure {cpu_pressure()}")
    print(
        f"memory   vector cache {vectors_bytes / 2**20:.0f} MiB; process RSS {rss_start:.0f} ->"
        f" {rss_mb():.0f} MiB (peak {peak:.0f} MiB)"
    )
    if path != ":memory:":
        size = sum(f.stat().st_size for f in Path(path).parent.glob(Path(path).name + "*"))
        print(f"disk     {size / 2**20:.0f} MiB (database + WAL)")
    await index.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--dimension", type=int, default=384)
    parser.add_argument("--memory", action="store_true", help="use ':memory:' instead of a file")
    parser.add_argument("--corpus", choices=["locomo", "zipf"], default="locomo")
    parser.add_argument("--path", help="keep the database here (reused when it exists)")
    parser.add_argument("--text-engine", choices=TEXT_ENGINES, default="tantivy")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        target = args.path or (":memory:" if args.memory else os.path.join(tmp, "index.sqlite3"))
        asyncio.run(main(args.docs, args.dimension, target, args.corpus, args.text_engine))
