"""`python -m benchmarks.vector_search`: the embedded index's vector search, block by block.

Fills the vector cache (``cogsub.index.sqlite.vectors.VectorCache``) with soak-like rows in
ten banks (``benchmarks.vector_memory``'s, with random vectors of ``--dimension``), for each of
``--documents``, and times ``--searches`` searches of one bank two ways in the same run: the
whole-index pass the cache made before 2026-12-05 (one mask, score and candidate list over
every slot, reproduced below as the baseline) and the cache's own search, a block of
slots at a time. For each it reports p50/p95 latency and what one search allocated at its
peak (tracemalloc), and checks that both found the same documents with the same scores.
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
from cogsub.index.sqlite.vectors import VectorCache

Search = Callable[
    [VectorCache, npt.NDArray[np.float32], SearchFilters, int], list[tuple[int, float]]
]


class WholeIndexSearch:
    """The baseline: every slot's mask and score at once into buffers as long as the
    index (kept between searches, as the cache kept them), then a selection among the
    candidates."""

    def __init__(self, vectors: VectorCache) -> None:
        capacity = vectors.columns.shape[1]
        self.mask_scratch = np.empty(capacity, dtype=np.bool_)
        self.score_scratch = np.empty(capacity, dtype=np.float32)

    def __call__(
        self,
        vectors: VectorCache,
        query: npt.NDArray[np.float32],
        filters: SearchFilters,
        size: int,
    ) -> list[tuple[int, float]]:
        code = vectors.bank_codes.get(filters.bank_id)
        if code is None:
            return []
        n = vectors.used
        mask = np.equal(vectors.banks[:n], code, out=self.mask_scratch[:n])
        if filters.tags_any is not None:
            mask &= vectors._tags.holding_any(filters.tags_any)[vectors.tag_sets[:n]]
        candidates = np.flatnonzero(mask)
        if candidates.size == 0:
            return []
        scored = np.matmul(query, vectors.columns[:, :n], out=self.score_scratch[:n])
        scores = scored[candidates]
        k = min(size, candidates.size)
        top = np.argpartition(scores, scores.size - k)[scores.size - k :]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(vectors.doc_ids[candidates[i]]), float(scores[i])) for i in top]


def filled(count: int, dimension: int) -> VectorCache:
    rng, vectors_rng = random.Random(1), np.random.default_rng(1)
    vectors = VectorCache(dimension, 0)
    vectors.reserve(count)
    for start in range(0, count, 4096):
        chunk = rows(start, min(4096, count - start), rng, 0.05)
        drawn = vectors_rng.standard_normal((len(chunk), dimension)).astype(np.float32)
        vectors.put(
            [(*row[:-1], vector.tobytes()) for row, vector in zip(chunk, drawn, strict=True)]
        )
    return vectors


def timed(
    search: Search, vectors: VectorCache, queries: list[npt.NDArray[np.float32]], size: int
) -> dict[str, Any]:
    filters = [SearchFilters(bank_id=f"bank-{i % 10}") for i in range(len(queries))]
    tracemalloc.start()
    try:
        search(vectors, queries[0], filters[0], size)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    took, found = [], []
    for query, wanted in zip(queries, filters, strict=True):
        began = time.perf_counter()
        found.append(search(vectors, query, wanted, size))
        took.append((time.perf_counter() - began) * 1000)
    return {
        "p50_ms": round(statistics.median(took), 2),
        "p95_ms": round(statistics.quantiles(took, n=20)[-1], 2),
        "peak_bytes": peak,
        "found": found,
    }


def measure(count: int, searches: int, size: int, dimension: int) -> dict[str, Any]:
    vectors = filled(count, dimension)
    rng = np.random.default_rng(2)
    queries = [q / np.linalg.norm(q) for q in rng.standard_normal((searches, dimension))]
    queries = [q.astype(np.float32) for q in queries]
    baseline = timed(WholeIndexSearch(vectors), vectors, queries, size)
    blocks = timed(VectorCache.search, vectors, queries, size)
    return {
        "documents": count,
        "dimension": dimension,
        "searches": searches,
        "size": size,
        "whole_index": {k: v for k, v in baseline.items() if k != "found"},
        "blocks": {k: v for k, v in blocks.items() if k != "found"},
        "p50_ratio": round(baseline["p50_ms"] / blocks["p50_ms"], 2),
        "same_documents": sum(
            a == b for a, b in zip(baseline["found"], blocks["found"], strict=True)
        ),
        # Scores are float32 products, and BLAS may sum a block's in another order than the
        # whole matrix's: two documents within a rounding error may trade places at the cut.
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
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    print(
        f"{'documents':>10} {'whole p50':>10} {'p95':>7} {'peak kB':>8}"
        f" {'blocks p50':>11} {'p95':>7} {'peak kB':>8} {'ratio':>6} same documents"
    )
    results = []
    for count in (int(n) for n in args.documents.split(",")):
        result = measure(count, args.searches, args.size, args.dimension)
        results.append(result)
        whole, blocks = result["whole_index"], result["blocks"]
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
