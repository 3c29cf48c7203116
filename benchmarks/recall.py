"""`make bench-recall`: recall latency on the embedded stack, beside MiniLM's query embedding.

Stores, all filled by bulk upserts and archive writes (this measures recall, not ingestion):

- ``--size N [--banks B]``: N memories of realistic English (:mod:`benchmarks.english_corpus`,
  recombined LoCoMo dev turns) spread over B banks, 500 sessions a bank. Their vectors come
  from the project's hash embedder at MiniLM's dimension, since MiniLM would take hours at a
  million: exact search costs the same whatever the vectors hold.
- ``--locomo``: the LoCoMo dev conversations, one bank each, every turn a memory
  ("Speaker: text", timed and in sessions as ``cogsub eval locomo`` retains them), with
  MiniLM vectors; each answerable question is asked of its own conversation's bank.
- ``--text-engine fts5``: the index's text arm (``SqliteMemoryIndex(text_engine=...)``; the
  default, tantivy, answers banks of 20,000 memories or more), recorded as ``<name>-fts5``.

Queries are the dev questions (in turn over the banks). Reported: ``MemoryService.recall``
p50/p95/p99 excluding query embedding (the time spent inside the embedder is subtracted,
whatever texts recall embeds) and including it with MiniLM live; MiniLM's own p50 for one
question measured in the same run, and the ratio recall p95 / that p50; the resident memory
the store added, per million memories.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.english_corpus import (
    LOCOMO_DEV,
    MissingDatasetError,
    documents,
    locomo_phrasebook,
    locomo_questions,
    require_locomo,
)
from benchmarks.results import record
from cogsub.archive.filesystem import FilesystemArchive
from cogsub.bus.memory import InMemoryEventBus
from cogsub.core import IndexDocument, format_timestamp
from cogsub.core.context import DEFAULT_CONTEXT_TOKENS, ContextRequest
from cogsub.core.memory import RecallRequest
from cogsub.embeddings.hash import HashEmbedder
from cogsub.embeddings.minilm import MiniLMEmbedder
from cogsub.embeddings.ports import Embedder
from cogsub.evaluation.locomo_data import ADVERSARIAL_CATEGORY, load_locomo, memory_id_for, safe_id
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.index.sqlite.index import TEXT_ENGINES, TextEngineName
from cogsub.recall import MemoryService
from cogsub.recall.collector import settle_collector
from cogsub.recall.context_block import context_block, recall_k

DIMENSION = 384
SESSIONS_PER_BANK = 500
BATCH = 1000
#: p95 excluding embedding the one-trip recall aims at (issue 32), by store.
TARGET_LOCOMO_MS = 15.0
TARGET_ONE_BANK_MS = 30.0
TARGET_MANY_BANKS_MS = 60.0
TARGET_RATIO = 3.0
#: A context block's p95 over that of the one recall it makes (issue 29).
TARGET_CONTEXT_RATIO = 1.10
#: Below this many memories the process's fixed costs hide what each memory adds.
PER_MILLION_FROM = 100_000

Ask = tuple[str, str]  # (bank, question)
Vectors = Callable[[list[str]], Awaitable[list[list[float]]]]


@dataclass(frozen=True)
class Memory:
    """One memory to store: where it goes and what it says."""

    memory_id: str
    bank: str
    session: str
    text: str
    at: datetime


@dataclass(frozen=True)
class Store:
    """What to fill and what to ask of it."""

    name: str
    count: int
    banks: int
    memories: Iterable[Memory]
    asks: list[Ask]
    vectors: str


def bank_name(number: int) -> str:
    return f"bench-bank-{number:03d}"


def synthetic_store(count: int, banks: int, queries: int, path: Path = LOCOMO_DEV) -> Store:
    """``count`` English memories over ``banks`` banks; the dev questions in turn over them."""
    book = locomo_phrasebook(path)

    def memories() -> Iterator[Memory]:
        for i, text in enumerate(documents(book, count, seed=11)):
            bank = i % banks
            yield Memory(
                f"m{i:07d}", bank_name(bank), f"s{(i // banks) % SESSIONS_PER_BANK}", text, _time(i)
            )

    questions = locomo_questions(path)
    asks = [(bank_name(i % banks), questions[i % len(questions)]) for i in range(queries)]
    return Store(
        "english", count, banks, memories(), asks, "hash-384 (the project's hash embedder)"
    )


def locomo_store(path: Path) -> Store:
    """The dev conversations, one bank each, turns as ``cogsub eval locomo`` retains them."""
    memories: list[Memory] = []
    asks: list[Ask] = []
    for conversation in load_locomo(require_locomo(path)):
        bank = safe_id(f"locomo-{conversation.sample_id}")
        memories += [
            Memory(
                memory_id_for(conversation.sample_id, turn.dia_id),
                bank,
                conversation.session_id(turn),
                turn.content,
                turn.timestamp,
            )
            for turn in conversation.turns
        ]
        known = {turn.dia_id for turn in conversation.turns}
        # As the evaluation scores them: answerable, with evidence in this conversation.
        asks += [
            (bank, q.question)
            for q in conversation.questions
            if q.category != ADVERSARIAL_CATEGORY and known.intersection(q.evidence)
        ]
    banks = len({m.bank for m in memories})
    return Store("locomo-dev", len(memories), banks, memories, asks, "MiniLM")


def _time(i: int) -> datetime:
    return datetime(2025, 1, 1, tzinfo=UTC) + timedelta(minutes=7 * i)


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _batches(memories: Iterable[Memory]) -> Iterator[list[Memory]]:
    batch: list[Memory] = []
    for memory in memories:
        batch.append(memory)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


async def fill(
    index: SqliteMemoryIndex, archive: FilesystemArchive, store: Store, vectors: Vectors
) -> None:
    """Archive and index every memory of ``store``, a thousand at a time."""
    await index.ensure(dimension=DIMENSION)
    started = time.perf_counter()
    done = 0
    for batch in _batches(store.memories):
        embedded = await vectors([m.text for m in batch])
        docs: list[IndexDocument] = []
        puts: list[tuple[str, bytes]] = []
        for memory, vector in zip(batch, embedded, strict=True):
            document, event = _stored(memory, vector, done + len(docs))
            docs.append(document)
            puts.append((document.object_storage_key, json.dumps(event).encode()))
        await archive.put_once_many(puts)
        await index.upsert(docs)
        done += len(docs)
        if done % 50_000 < BATCH:
            rate = done / (time.perf_counter() - started)
            print(f"  filled {done}/{store.count} ({rate:.0f}/s)", file=sys.stderr, flush=True)


def _stored(memory: Memory, vector: list[float], i: int) -> tuple[IndexDocument, dict[str, Any]]:
    timestamp = format_timestamp(memory.at)
    key = f"events/{timestamp[:4]}/{timestamp[5:7]}/{timestamp[8:10]}/{memory.memory_id}.json"
    tags = [f"t{i % 20}"]
    event = {
        "eventId": memory.memory_id,
        "timestamp": timestamp,
        "type": "user_input",
        "bankId": memory.bank,
        "context": {"sessionId": memory.session},
        "input": {"text": memory.text},
        "importanceScore": 0.5,
        "tags": tags,
        "objectStorageKey": key,
    }
    document = IndexDocument(
        event_id=memory.memory_id,
        timestamp=timestamp,
        event_type="user_input",
        session_id=memory.session,
        summary=memory.text[:240],
        embedding=vector,
        importance_score=0.5,
        reward_score=0.5,
        confidence=0.5,
        object_storage_key=key,
        tags=tags,
        bank_id=memory.bank,
        fact_type="world" if i % 3 else "experience",
    )
    return document, event


class TimedEmbedder:
    """An embedder that keeps the time spent inside it, so recall can be timed without it."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self.spent_s = 0.0

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        began = time.perf_counter()
        try:
            return await self._inner.embed(texts)
        finally:
            self.spent_s += time.perf_counter() - began

    async def close(self) -> None:
        return None


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    cut = statistics.quantiles(sorted(samples), n=100, method="inclusive")
    return {"p50_ms": round(cut[49], 2), "p95_ms": round(cut[94], 2), "p99_ms": round(cut[98], 2)}


async def time_recalls(
    service: MemoryService, embedder: TimedEmbedder, asks: Sequence[Ask]
) -> tuple[list[float], list[float]]:
    """Each recall's wall time, and that time less what the embedder took, in ms."""
    for bank, query in asks[:20]:
        await service.recall(bank, RecallRequest(query=query))  # warm caches and the model
    walls, excluded = [], []
    for bank, query in asks:
        embedder.spent_s = 0.0
        began = time.perf_counter()
        await service.recall(bank, RecallRequest(query=query, k=10))
        wall = time.perf_counter() - began
        walls.append(wall * 1000)
        excluded.append((wall - embedder.spent_s) * 1000)
    await service.drain()
    return walls, excluded


async def time_repeated(service: MemoryService, asks: Sequence[Ask]) -> dict[str, Any]:
    """The asks again on a service that has embedded them: p50/p95 ms and CPU ms per recall.

    Query vectors come from the service's cache, so nothing is embedded; the process's
    CPU time per recall (every thread, the index's readers included) moves much less
    with the host's load than wall time does, so it is the figure to compare trees by.
    """
    walls = []
    began_cpu = time.process_time()
    for bank, query in asks:
        began = time.perf_counter()
        await service.recall(bank, RecallRequest(query=query, k=10))
        walls.append((time.perf_counter() - began) * 1000)
    cpu_ms = (time.process_time() - began_cpu) * 1000 / len(asks)
    await service.drain()
    cut = percentiles(walls)
    return {"p50_ms": cut["p50_ms"], "p95_ms": cut["p95_ms"], "cpu_ms_per_recall": round(cpu_ms, 2)}


async def time_context(
    service: MemoryService, embedder: TimedEmbedder, asks: Sequence[Ask]
) -> dict[str, Any]:
    """Context blocks beside the recalls they stand on, excluding embedding, in ms.

    Each ask in turn: recall as this bench times it (k=10), recall of as many
    memories as a default block recalls, then the block itself, so a load that
    comes and goes on the machine falls on all three alike.
    """
    wanted = ContextRequest(query="warm-up", max_tokens=DEFAULT_CONTEXT_TOKENS)
    same_k = recall_k(wanted.max_tokens)
    for bank, query in asks[:20]:
        await context_block(service, bank, wanted.model_copy(update={"query": query}))
    samples: dict[str, list[float]] = {"recall": [], "recall_same_k": [], "context": []}
    tokens = []

    async def timed(name: str, work: Awaitable[Any]) -> Any:
        embedder.spent_s = 0.0
        began = time.perf_counter()
        done = await work
        samples[name].append((time.perf_counter() - began - embedder.spent_s) * 1000)
        return done

    for bank, query in asks:
        await timed("recall", service.recall(bank, RecallRequest(query=query, k=10)))
        await timed("recall_same_k", service.recall(bank, RecallRequest(query=query, k=same_k)))
        asked = wanted.model_copy(update={"query": query})
        block = await timed("context", context_block(service, bank, asked))
        tokens.append(block.tokens)
    await service.drain()
    cut = {name: percentiles(values) for name, values in samples.items()}
    ratio = round(cut["context"]["p95_ms"] / cut["recall_same_k"]["p95_ms"], 3)
    return {
        "max_tokens": wanted.max_tokens,
        "recall_k": same_k,
        "block_tokens_p50": statistics.median(tokens),
        "context_excluding_embedding": cut["context"],
        "recall_k10_excluding_embedding": cut["recall"],
        "recall_same_k_excluding_embedding": cut["recall_same_k"],
        "context_p50_over_recall_same_k": round(
            cut["context"]["p50_ms"] / cut["recall_same_k"]["p50_ms"], 3
        ),
        "context_p95_over_recall_same_k": ratio,
        "context_p95_over_recall_k10": round(cut["context"]["p95_ms"] / cut["recall"]["p95_ms"], 3),
        "target_context_over_recall": TARGET_CONTEXT_RATIO,
        "context_target_met": ratio <= TARGET_CONTEXT_RATIO,
    }


async def embedding_p50(minilm: MiniLMEmbedder, asks: Sequence[Ask]) -> float:
    """MiniLM's p50 for one question alone, as recall embeds it."""
    samples = []
    for _, query in asks:
        began = time.perf_counter()
        await minilm.embed([query])
        samples.append((time.perf_counter() - began) * 1000)
    return round(statistics.median(samples), 2)


def _per_million(grown_mib: float, memories: int) -> float | None:
    """Growth scaled to a million memories; None for small stores, where fixed costs dominate."""
    if memories < PER_MILLION_FROM:
        return None
    return round(grown_mib * 1e6 / memories, 1)


def target_ms(store: Store) -> float:
    if store.name == "locomo-dev":
        return TARGET_LOCOMO_MS
    return TARGET_ONE_BANK_MS if store.banks == 1 else TARGET_MANY_BANKS_MS


async def bench_store(
    store: Store,
    minilm: MiniLMEmbedder,
    workdir: Path | None,
    text_engine: TextEngineName = "tantivy",
) -> dict[str, Any]:
    """Fill ``store``, then time its asks with the store's embedder and with MiniLM."""
    own: Embedder = minilm if store.vectors == "MiniLM" else HashEmbedder(DIMENSION)
    with tempfile.TemporaryDirectory(prefix="cogsub-recall-", dir=workdir) as tmp:
        before_fill = rss_mib()
        index = SqliteMemoryIndex(Path(tmp) / "index.sqlite3", text_engine=text_engine)
        archive = FilesystemArchive(Path(tmp) / "archive")
        await fill(index, archive, store, own.embed)
        settle_collector()  # as `cogsub run` does once it has started: no full walks on recall
        bus = InMemoryEventBus()
        timed_own, timed_minilm = TimedEmbedder(own), TimedEmbedder(minilm)
        first = MemoryService(bus=bus, archive=archive, index=index, embedder=timed_own)
        _, excluded = await time_recalls(first, timed_own, store.asks)
        repeated = await time_repeated(first, store.asks)
        walls, _ = await time_recalls(
            MemoryService(bus=bus, archive=archive, index=index, embedder=timed_minilm),
            timed_minilm,
            store.asks,
        )
        context = await time_context(
            MemoryService(bus=bus, archive=archive, index=index, embedder=timed_own),
            timed_own,
            store.asks,
        )
        embed_p50 = await embedding_p50(minilm, store.asks)
        after = rss_mib()
        await index.close()
        await archive.close()
    gc.unfreeze()  # the next store's run must not keep this one's cycles for good
    excluding = percentiles(excluded)
    ratio = round(excluding["p95_ms"] / embed_p50, 2)
    return {
        "store": store.name,
        "text_engine": text_engine,
        "memories": store.count,
        "banks": store.banks,
        "queries": len(store.asks),
        "document_vectors": store.vectors,
        "excluding_embedding": excluding,
        "including_minilm": percentiles(walls),
        "minilm_query_embedding_p50_ms": embed_p50,
        "p95_over_embedding_p50": ratio,
        "target_p95_ms": target_ms(store),
        "p95_target_met": excluding["p95_ms"] <= target_ms(store),
        "ratio_target_met": ratio <= TARGET_RATIO,
        "rss_after_recall_mib": round(after, 1),
        "rss_store_growth_mib": round(after - before_fill, 1),
        "rss_per_million_memories_mib": _per_million(after - before_fill, store.count),
        "repeated_questions": repeated,
        "context": context,
    }


async def main_async(
    stores: Sequence[Store], workdir: Path | None, text_engine: TextEngineName = "tantivy"
) -> list[dict[str, Any]]:
    minilm = MiniLMEmbedder()
    await minilm.load()  # before any store is measured: the model is not the store's memory
    rows = []
    try:
        for store in stores:
            rows.append(await bench_store(store, minilm, workdir, text_engine))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        await minilm.close()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench-recall")
    parser.add_argument("--size", type=int, action="append", help="memories (repeatable)")
    parser.add_argument("--banks", type=int, default=1, help="banks the memories spread over")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--locomo", action="store_true", help="the LoCoMo dev banks instead of --size"
    )
    parser.add_argument("--locomo-file", type=Path, default=LOCOMO_DEV, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, default=None, help="where the stores go")
    parser.add_argument(
        "--text-engine", choices=TEXT_ENGINES, default="tantivy", help="the index's text arm"
    )
    args = parser.parse_args(argv)
    if args.banks < 1 or args.queries < 1 or any(size < 1 for size in args.size or []):
        parser.error("--size, --banks and --queries must be at least 1")
    try:
        if args.locomo:
            stores = [locomo_store(args.locomo_file)]
            name = "recall-locomo"
        else:
            sizes = args.size or [10_000, 100_000]
            stores = [
                synthetic_store(size, args.banks, args.queries, args.locomo_file) for size in sizes
            ]
            name = "recall" if args.banks == 1 else f"recall-{args.banks}-banks"
    except MissingDatasetError as missing:
        parser.error(str(missing))
    if args.text_engine != "tantivy":
        name = f"{name}-{args.text_engine}"
    rows = asyncio.run(main_async(stores, args.workdir, args.text_engine))
    record(name, rows, argv, module="recall")
    _print_table(rows)
    return 0


def _print_table(rows: Sequence[dict[str, Any]]) -> None:
    print("document vectors: " + ", ".join(sorted({row["document_vectors"] for row in rows})))
    print(
        "store | memories | banks | excl. embedding p50/p95/p99 ms (target p95) | "
        "incl. MiniLM p50/p95/p99 ms | MiniLM query p50 ms | p95 / embed p50 (target 3) | "
        "RSS MiB per 1M memories | repeated questions p50/p95 ms, CPU ms a recall"
    )
    print("--- | --- | --- | --- | --- | --- | --- | --- | ---")
    for row in rows:
        ex, inc = row["excluding_embedding"], row["including_minilm"]
        again = row["repeated_questions"]
        met = "met" if row["p95_target_met"] else "not met"
        ratio_met = "met" if row["ratio_target_met"] else "not met"
        target = f"≤ {row['target_p95_ms']:g}: {met}"
        print(
            f"{row['store']} | {row['memories']} | {row['banks']} | "
            f"{ex['p50_ms']} / {ex['p95_ms']} / {ex['p99_ms']} ({target}) | "
            f"{inc['p50_ms']} / {inc['p95_ms']} / {inc['p99_ms']} | "
            f"{row['minilm_query_embedding_p50_ms']} | "
            f"{row['p95_over_embedding_p50']} ({ratio_met}) | "
            f"{row['rss_per_million_memories_mib'] or '–'} "
            f"(grew {row['rss_store_growth_mib']} MiB) | "
            f"{again['p50_ms']} / {again['p95_ms']}, {again['cpu_ms_per_recall']}"
        )
    _print_context_table(rows)


def _print_context_table(rows: Sequence[dict[str, Any]]) -> None:
    print()
    print(
        "store | memories | context p50/p95 ms | recall same k p50/p95 ms | "
        "recall k=10 p50/p95 ms | context p95 / recall same k (target ≤ 1.10) | / recall k=10"
    )
    print("--- | --- | --- | --- | --- | --- | ---")
    for row in rows:
        ctx = row["context"]
        block = ctx["context_excluding_embedding"]
        same = ctx["recall_same_k_excluding_embedding"]
        k10 = ctx["recall_k10_excluding_embedding"]
        met = "met" if ctx["context_target_met"] else "not met"
        print(
            f"{row['store']} | {row['memories']} | {block['p50_ms']} / {block['p95_ms']} | "
            f"{same['p50_ms']} / {same['p95_ms']} (k={ctx['recall_k']}) | "
            f"{k10['p50_ms']} / {k10['p95_ms']} | "
            f"{ctx['context_p95_over_recall_same_k']} ({met}) | "
            f"{ctx['context_p95_over_recall_k10']}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
