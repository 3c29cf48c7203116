"""`make bench-text-engines`: SQLite FTS5 against tantivy as the embedded index's text arm.

Both engines index the same corpus (realistic English over 100 banks, from
:mod:`benchmarks.english_corpus`) and answer the same queries: the LoCoMo dev
questions through the project's ``query_terms``, each against one bank, top 50.

- FTS5 runs as the project runs it: documents go in through ``SqliteMemoryIndex.upsert``
  (its schema, per-bank tables, pragmas; batches of 1,000, each one durable transaction),
  and queries through the text arm's own ranking, ``text.rank_text``, on a read-only
  connection set up like the index's readers.
- tantivy (PyPI ``tantivy``) is set up as an adapter would be: ``en_stem`` analysis with
  positions, the bank a raw term that must match and scores nothing, the document number a
  fast field; a commit per batch of 1,000 (the durability point), merges waited for.

Reported per size: p50/p95/p99 of a top-50 query (single thread, warm, per query the median
of ``--rounds`` rounds in which the two engines alternate, so load drifts hit both alike),
build rate, disk, resident memory the engine added, overlap@10 of tantivy's hits with FTS5's,
and each ratio tantivy / FTS5 measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import tantivy

from benchmarks.english_corpus import (
    LOCOMO_DEV,
    MissingDatasetError,
    documents,
    locomo_phrasebook,
    locomo_questions,
    require_locomo,
)
from benchmarks.results import record
from cogsub.core import IndexDocument, format_timestamp
from cogsub.index.ports import SearchFilters
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.index.sqlite.text import rank_text
from cogsub.index.text_query import join_terms, query_terms
from cogsub.sqlite_support import transaction

BANKS = 100
TOP = 50
OVERLAP_AT = 10
BATCH = 1_000
#: The vectors are not measured here: one short constant vector keeps their cost negligible.
_VECTOR = [1.0, 0.0, 0.0, 0.0]
_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
#: As the index's reader connections (connections._open_reader).
_READER_CACHE_MIB = 48

Query = tuple[str, list[str]]  # (bank, terms)


def bank_of(position: int, banks: int = BANKS) -> str:
    return f"bank-{position % banks:03d}"


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def disk_mib(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


@dataclass
class Engine:
    """A built engine: how to ask it, and what building it cost."""

    search: Callable[[str, list[str]], list[int]]
    build_s: float
    disk_mib: float
    text_mib: float
    rss_mib: float
    close: Callable[[], None]


async def build_fts5(folder: Path, texts: Sequence[str], banks: int) -> Engine:
    """The project's SqliteMemoryIndex filled by upserts; searched through ``rank_text``."""
    path = folder / "index.sqlite3"
    index = SqliteMemoryIndex(path, text_engine="fts5")
    await index.ensure(dimension=len(_VECTOR))
    spent = 0.0
    for start in range(0, len(texts), BATCH):
        batch = [
            _document(i, texts[i], banks) for i in range(start, min(len(texts), start + BATCH))
        ]
        began = time.perf_counter()
        await index.upsert(batch)
        spent += time.perf_counter() - began
    await index.close()
    numbers, text_bytes = _document_numbers(path)
    before = rss_mib()
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA cache_size = -{_READER_CACHE_MIB * 1024}")
    conn.execute("PRAGMA query_only = ON")

    def search(bank: str, terms: list[str]) -> list[int]:
        with transaction(conn, write=False):
            ranked = rank_text(conn, terms, SearchFilters(bank_id=bank), TOP)
        return [numbers[doc_id] for doc_id, _ in ranked]

    _warm(search, texts, banks)
    return Engine(
        search, spent, disk_mib(folder), text_bytes / 2**20, rss_mib() - before, conn.close
    )


def _document_numbers(path: Path) -> tuple[dict[int, int], int]:
    """Each row's position in the corpus, and the FTS tables' bytes (the rest is not text).

    Read on a connection of its own, so the measured one starts cold.
    """
    conn = sqlite3.connect(path)
    try:
        found = conn.execute("SELECT doc_id, event_id FROM documents").fetchall()
        (text_bytes,) = conn.execute(
            "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name LIKE 'text!_%' ESCAPE '!'"
        ).fetchone()
    finally:
        conn.close()
    return {doc_id: int(event_id[1:]) for doc_id, event_id in found}, text_bytes


def _document(position: int, text: str, banks: int) -> IndexDocument:
    return IndexDocument(
        event_id=f"d{position:07d}",
        timestamp=format_timestamp(_EPOCH + timedelta(minutes=position)),
        event_type="user_input",
        session_id=None,
        summary=text,
        tags=[],
        embedding=_VECTOR,
        importance_score=0.5,
        reward_score=0.5,
        confidence=0.5,
        object_storage_key=f"events/d{position:07d}.json",
        bank_id=bank_of(position, banks),
    )


def _tantivy_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_integer_field("number", stored=False, fast=True, indexed=False)
    builder.add_text_field("bank", tokenizer_name="raw", index_option="basic")
    builder.add_text_field("summary", tokenizer_name="en_stem", index_option="position")
    return builder.build()


def fill_tantivy(
    index: tantivy.Index, texts: Sequence[str], banks: int, threads: int, *, batch: int
) -> float:
    """Seconds to add every text, committing every ``batch`` and waiting for the merges."""
    writer = index.writer(heap_size=128 * 2**20 * threads, num_threads=threads)
    began = time.perf_counter()
    for start in range(0, len(texts), batch):
        for i in range(start, min(len(texts), start + batch)):
            writer.add_document(
                tantivy.Document(number=i, bank=bank_of(i, banks), summary=texts[i])
            )
        writer.commit()
    writer.wait_merging_threads()
    return time.perf_counter() - began


def bulk_rate_tantivy(folder: Path, texts: Sequence[str], banks: int, threads: int) -> float:
    """Documents a second with one commit at the end, as a replay rebuilding it would."""
    index = tantivy.Index(_tantivy_schema(), path=str(folder))
    return len(texts) / fill_tantivy(index, texts, banks, threads, batch=len(texts))


def build_tantivy(folder: Path, texts: Sequence[str], banks: int, threads: int) -> Engine:
    """One tantivy index for every bank; the bank a zero-score filter term."""
    schema = _tantivy_schema()
    before = rss_mib()
    index = tantivy.Index(schema, path=str(folder))
    spent = fill_tantivy(index, texts, banks, threads, batch=BATCH)
    index.reload()
    searcher = index.searcher()

    def search(bank: str, terms: list[str]) -> list[int]:
        matched = index.parse_query(join_terms(terms), ["summary"])
        in_bank = tantivy.Query.const_score_query(
            tantivy.Query.term_query(schema, "bank", bank), 0.0
        )
        both = tantivy.Query.boolean_query(
            [(tantivy.Occur.Must, matched), (tantivy.Occur.Must, in_bank)]
        )
        found = searcher.search(both, TOP, count=False).hits
        numbers = searcher.fast_field_values("number", [address for _, address in found])
        return [int(number) for number in numbers if number is not None]

    _warm(search, texts, banks)
    size = disk_mib(folder)
    return Engine(search, spent, size, size, rss_mib() - before, lambda: None)


def _warm(search: Callable[[str, list[str]], list[int]], texts: Sequence[str], banks: int) -> None:
    for position in range(min(banks, len(texts))):
        search(bank_of(position, banks), query_terms(texts[position])[:6])


def make_queries(questions: Sequence[str], banks: int) -> list[Query]:
    """Each question against one bank, in turn; questions without terms are left out."""
    asked = [(bank_of(i, banks), query_terms(q)) for i, q in enumerate(questions)]
    return [(bank, terms) for bank, terms in asked if terms]


def time_both(
    engines: dict[str, Engine], queries: Sequence[Query], rounds: int
) -> dict[str, list[float]]:
    """Per engine, each query's median ms over ``rounds``; the engines alternate per query."""
    samples: dict[str, list[list[float]]] = {name: [[] for _ in queries] for name in engines}
    names = list(engines)
    for round_number in range(rounds):
        order = names if round_number % 2 == 0 else names[::-1]
        for position, (bank, terms) in enumerate(queries):
            for name in order:
                began = time.perf_counter()
                engines[name].search(bank, terms)
                samples[name][position].append((time.perf_counter() - began) * 1000)
    return {name: [statistics.median(s) for s in per] for name, per in samples.items()}


def overlap_at(first: Engine, second: Engine, queries: Sequence[Query], k: int) -> float:
    """Mean share of ``first``'s top k that ``second`` also returns, over queries with hits."""
    shares = []
    for bank, terms in queries:
        expected = first.search(bank, terms)[:k]
        if expected:
            shares.append(len(set(expected) & set(second.search(bank, terms)[:k])) / len(expected))
    return round(statistics.fmean(shares), 3) if shares else float("nan")


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    cut = statistics.quantiles(sorted(samples), n=100, method="inclusive")
    return {"p50_ms": round(cut[49], 3), "p95_ms": round(cut[94], 3), "p99_ms": round(cut[98], 3)}


async def measure(
    size: int,
    *,
    banks: int,
    rounds: int,
    threads: int,
    workdir: Path | None,
    locomo: Path = LOCOMO_DEV,
) -> dict[str, Any]:
    """Both engines on ``size`` documents over ``banks`` banks, and their ratios."""
    texts = list(documents(locomo_phrasebook(locomo), size, seed=size))
    queries = make_queries(locomo_questions(locomo), banks)
    with tempfile.TemporaryDirectory(prefix="cogsub-text-engines-", dir=workdir) as tmp:
        for name in ("fts5", "tantivy", "tantivy-bulk"):
            (Path(tmp) / name).mkdir()
        print(f"  {size}: building FTS5", file=sys.stderr, flush=True)
        fts5 = await build_fts5(Path(tmp) / "fts5", texts, banks)
        print(f"  {size}: building tantivy", file=sys.stderr, flush=True)
        engine = build_tantivy(Path(tmp) / "tantivy", texts, banks, threads)
        bulk_rate = bulk_rate_tantivy(Path(tmp) / "tantivy-bulk", texts, banks, threads)
        engines = {"fts5": fts5, "tantivy": engine}
        timed = time_both(engines, queries, rounds)
        overlap = overlap_at(fts5, engine, queries, OVERLAP_AT)
        for built in engines.values():
            built.close()
    row: dict[str, Any] = {"documents": size, "banks": banks, "queries": len(queries)}
    for name, built in engines.items():
        row[name] = {
            **percentiles(timed[name]),
            "build_docs_per_s": round(size / built.build_s),
            "disk_mib": round(built.disk_mib, 1),
            "text_mib": round(built.text_mib, 1),
            "rss_added_mib": round(built.rss_mib, 1),
        }
    row["tantivy"]["overlap_at_10_with_fts5"] = overlap
    row["tantivy"]["bulk_build_docs_per_s"] = round(bulk_rate)
    row["tantivy_over_fts5"] = {
        key: round(row["tantivy"][key] / row["fts5"][key], 3)
        for key in ("p50_ms", "p95_ms", "p99_ms", "build_docs_per_s", "text_mib")
    }
    row["writer_threads_tantivy"] = threads
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench-text-engines")
    parser.add_argument("--sizes", default="100000,1000000", help="documents, comma-separated")
    parser.add_argument("--banks", type=int, default=BANKS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="tantivy writer threads")
    parser.add_argument("--workdir", type=Path, default=None, help="where the indexes go")
    parser.add_argument("--locomo-file", type=Path, default=LOCOMO_DEV, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",") if size]
    if not sizes or min(sizes) < 1 or args.banks < 1 or args.rounds < 1:
        parser.error("--sizes, --banks and --rounds must be at least 1")
    try:
        require_locomo(args.locomo_file)
    except MissingDatasetError as missing:
        parser.error(str(missing))
    rows = []
    for size in sizes:
        rows.append(
            asyncio.run(
                measure(
                    size,
                    banks=args.banks,
                    rounds=args.rounds,
                    threads=args.threads,
                    workdir=args.workdir,
                    locomo=args.locomo_file,
                )
            )
        )
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    record("text_engines", rows, argv)
    _print_table(rows)
    return 0


def _print_table(rows: Sequence[dict[str, Any]]) -> None:
    print(f"2 engines, {os.cpu_count()} cores; top-{TOP} p50 / p95 / p99 ms, single thread, warm")
    print("FTS5 builds through SqliteMemoryIndex.upsert (rows and vectors too); disk: file,")
    print("text: its FTS tables; tantivy commits every 1,000 (bulk: one commit, as a replay)")
    print(
        "documents | engine | p50 / p95 / p99 ms | build docs/s | disk / text MiB | RSS added MiB"
    )
    print("--- | --- | --- | --- | --- | ---")
    for row in rows:
        for name in ("fts5", "tantivy"):
            f = row[name]
            print(
                f"{row['documents']} | {name} | {f['p50_ms']} / {f['p95_ms']} / {f['p99_ms']} | "
                f"{f['build_docs_per_s']} | {f['disk_mib']} / {f['text_mib']} | "
                f"{f['rss_added_mib']}"
            )
        print(f"{row['documents']} | tantivy bulk | | {row['tantivy']['bulk_build_docs_per_s']}")
        ratio = row["tantivy_over_fts5"]
        print(
            f"{row['documents']} | tantivy/FTS5 | {ratio['p50_ms']} / {ratio['p95_ms']} / "
            f"{ratio['p99_ms']} | {ratio['build_docs_per_s']} | text {ratio['text_mib']} | "
            f"overlap@10 {row['tantivy']['overlap_at_10_with_fts5']}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
