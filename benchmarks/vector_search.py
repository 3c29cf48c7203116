"""`python -m benchmarks.vector_search`: the embedded index's vector search, one bank's matrix.

Fills the vector cache (``cogsub.index.sqlite.vectors.VectorCache``) with soak-like rows dealt
to ``--banks`` banks (``benchmarks.vector_memory``'s, with random vectors of ``--dimension``), for
each of ``--documents``, and times ``--searches`` searches of one bank two ways in the same run:
the one matrix for every bank the cache kept before each bank had its own (every column scored a
block at a time and masked by bank, reproduced below as the baseline) and the cache's own search,
which scores the bank's columns only. For each it reports p50/p95 latency and what one search
allocated at its peak (tracemalloc), and checks that both found the same documents with the same
scores. ``--cache-only`` times the cache alone through its public methods, so that another
commit's cache can be timed on the same rows: ``PYTHONPATH=<its checkout>/libs``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.results import record
from benchmarks.vector_memory import rows
from cogsub.index.ports import SearchFilters
from cogsub.index.sqlite.vectors import SEARCH_BLOCK, VectorCache, one_blas_thread, unit

Search = Callable[[npt.NDArray[np.float32], SearchFilters, int], list[tuple[int, float]]]


class OneMatrixSearch:
    """The baseline: every bank's unit columns in one matrix in the order rows came, and a
    search that scores each block of it, masks by bank and keeps the best so far (ties to
    the earlier slot), as the cache did before each bank had its own matrix."""

    def __init__(self, count: int, dimension: int) -> None:
        self.columns = np.zeros((dimension, count), dtype=np.float32)
        self.banks = np.zeros(count, dtype=np.int32)
        self.doc_ids = np.zeros(count, dtype=np.int64)
        self.codes: dict[str, int] = {}
        self.mask_scratch = np.empty(min(count, SEARCH_BLOCK), dtype=np.bool_)
        self.score_scratch = np.empty(min(count, SEARCH_BLOCK), dtype=np.float32)

    def add(self, slot: int, row: tuple[Any, ...]) -> None:
        self.columns[:, slot] = unit(np.frombuffer(row[-1], dtype=np.float32))
        self.banks[slot] = self.codes.setdefault(row[2], len(self.codes))
        self.doc_ids[slot] = row[0]

    def __call__(
        self, query: npt.NDArray[np.float32], filters: SearchFilters, size: int
    ) -> list[tuple[int, float]]:
        code = self.codes.get(filters.bank_id)
        if code is None:
            return []
        best_slots = np.zeros(0, dtype=np.int64)
        best_scores = np.zeros(0, dtype=np.float32)
        for start in range(0, self.banks.size, SEARCH_BLOCK):
            stop = min(start + SEARCH_BLOCK, self.banks.size)
            width = stop - start
            mask = np.equal(self.banks[start:stop], code, out=self.mask_scratch[:width])
            scored = np.matmul(query, self.columns[:, start:stop], out=self.score_scratch[:width])
            if best_scores.size == size:
                mask &= scored > best_scores[-1]
            candidates = np.flatnonzero(mask)
            scores = scored[candidates]
            if candidates.size > size:
                cut = np.partition(scores, candidates.size - size)[candidates.size - size]
                above = np.flatnonzero(scores > cut)
                keep = np.concatenate([above, np.flatnonzero(scores == cut)[: size - above.size]])
                candidates, scores = candidates[keep], scores[keep]
            best_slots = np.concatenate([best_slots, candidates + start])
            best_scores = np.concatenate([best_scores, scores])
            order = np.lexsort((best_slots, -best_scores))[:size]
            best_slots, best_scores = best_slots[order], best_scores[order]
        return [
            (int(self.doc_ids[slot]), float(score))
            for slot, score in zip(best_slots, best_scores, strict=True)
        ]


def filled(count: int, dimension: int, banks: int, baseline: OneMatrixSearch | None) -> VectorCache:
    """The cache (and ``baseline``, if any) holding the same ``count`` rows."""
    rng, vectors_rng = random.Random(1), np.random.default_rng(1)
    vectors = VectorCache(dimension, 0)
    if hasattr(vectors, "reserve"):  # as the index's load does (older caches had none)
        vectors.reserve({f"bank-{b}": count // banks + (b < count % banks) for b in range(banks)})
    for start in range(0, count, 4096):
        chunk = rows(start, min(4096, count - start), rng, 0.05, banks)
        drawn = vectors_rng.standard_normal((len(chunk), dimension)).astype(np.float32)
        made = [(*row[:-1], vector.tobytes()) for row, vector in zip(chunk, drawn, strict=True)]
        vectors.put(made)
        if baseline is not None:
            for slot, row in enumerate(made, start=start):
                baseline.add(slot, row)
    return vectors


def unit_queries(searches: int, dimension: int) -> list[npt.NDArray[np.float32]]:
    drawn = np.random.default_rng(2).standard_normal((searches, dimension))
    return [(q / np.linalg.norm(q)).astype(np.float32) for q in drawn]


def cache_only(count: int, searches: int, size: int, dimension: int, banks: int) -> str:
    """The cache's own search alone, through its public methods: with ``PYTHONPATH`` set to
    another checkout's ``libs``, the same figures for that commit's cache."""
    one_blas_thread()
    vectors = filled(count, dimension, banks, None)
    found = timed(vectors.search, unit_queries(searches, dimension), banks, size)
    return (
        f"{count:,} documents ({dimension}-d, {banks} banks): p50 {found['p50_ms']} ms,"
        f" p95 {found['p95_ms']} ms, peak {found['peak_bytes'] // 1000} kB,"
        f" arrays {vectors.nbytes / 1e6:.0f} MB"
    )


def timed(
    search: Search, queries: list[npt.NDArray[np.float32]], banks: int, size: int
) -> dict[str, Any]:
    filters = [SearchFilters(bank_id=f"bank-{i * 7 % banks}") for i in range(len(queries))]
    tracemalloc.start()
    try:
        search(queries[0], filters[0], size)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    took, found = [], []
    for query, wanted in zip(queries, filters, strict=True):
        began = time.perf_counter()
        found.append(search(query, wanted, size))
        took.append((time.perf_counter() - began) * 1000)
    return {
        "p50_ms": round(statistics.median(took), 2),
        "p95_ms": round(statistics.quantiles(took, n=20)[-1], 2),
        "peak_bytes": peak,
        "found": found,
    }


def measure(count: int, searches: int, size: int, dimension: int, banks: int) -> dict[str, Any]:
    one_blas_thread()
    one_matrix = OneMatrixSearch(count, dimension)
    vectors = filled(count, dimension, banks, one_matrix)
    queries = unit_queries(searches, dimension)
    baseline = timed(one_matrix, queries, banks, size)
    blocks = timed(vectors.search, queries, banks, size)
    return {
        "documents": count,
        "banks": banks,
        "dimension": dimension,
        "searches": searches,
        "size": size,
        "one_matrix": {k: v for k, v in baseline.items() if k != "found"},
        "bank_matrix": {k: v for k, v in blocks.items() if k != "found"},
        "p50_ratio": round(baseline["p50_ms"] / blocks["p50_ms"], 2),
        "same_documents": sum(
            [d for d, _ in a] == [d for d, _ in b]
            for a, b in zip(baseline["found"], blocks["found"], strict=True)
        ),
        # Scores are float32 products, and BLAS may sum a bank's block in another order than
        # the one matrix's: two documents within a rounding error may trade places at the cut.
        "same_scores": all(
            np.allclose([s for _, s in a], [s for _, s in b], rtol=0, atol=1e-6)
            for a, b in zip(baseline["found"], blocks["found"], strict=True)
        ),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", default="250000,1000000,2500000", help="comma-separated")
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument(
        "--size", type=int, default=75, help="documents a search returns (recall: 75)"
    )
    parser.add_argument("--dimension", type=int, default=8, help="8: the soak's; 384: MiniLM")
    parser.add_argument("--banks", type=int, default=10, help="banks the documents are dealt to")
    parser.add_argument(
        "--cache-only", action="store_true", help="time the cache alone (any commit's: see above)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.cache_only:
        for count in (int(n) for n in args.documents.split(",")):
            print(cache_only(count, args.searches, args.size, args.dimension, args.banks))
        return 0
    print(
        f"{'documents':>10} {'one p50':>10} {'p95':>7} {'peak kB':>8}"
        f" {'bank p50':>11} {'p95':>7} {'peak kB':>8} {'ratio':>6} same documents"
    )
    results = []
    for count in (int(n) for n in args.documents.split(",")):
        result = measure(count, args.searches, args.size, args.dimension, args.banks)
        results.append(result)
        whole, blocks = result["one_matrix"], result["bank_matrix"]
        print(
            f"{count:>10,} {whole['p50_ms']:>10} {whole['p95_ms']:>7}"
            f" {whole['peak_bytes'] // 1000:>8} {blocks['p50_ms']:>11} {blocks['p95_ms']:>7}"
            f" {blocks['peak_bytes'] // 1000:>8} {result['p50_ratio']:>6}"
            f" {result['same_documents']}/{args.searches}"
            f" {'same scores' if result['same_scores'] else 'SCORES DIFFER'}",
            flush=True,
        )
    record("vector_search", results, argv)
    if args.json:
        print(json.dumps(results))
    return 0 if all(r["same_scores"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
