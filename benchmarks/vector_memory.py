"""`python -m benchmarks.vector_memory`: what a document costs in the embedded index's vector cache.

The cache (``cogsub.index.sqlite.vectors.VectorCache``) holds, per document, its unit vector and
filter columns, and maps its id to a slot. This fills one with ``--documents`` soak-like rows
(ids of events and of facts, ``--banks`` banks, two of eight subjects as tags, half with a proof
count, and a share ``--unique-tags`` with a tag of their own, as observations' ``cluster:`` tags
are) and reports what tracemalloc sees per document: all of it, and the numpy arrays alone. The
rest is Python objects per document; it is what grows with the data besides the vectors themselves.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import tracemalloc
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.results import record
from cogsub.index.sqlite.vectors import VectorCache

SUBJECTS = ["billing", "search", "auth", "payments", "ingestion", "reporting", "mobile", "infra"]
DIMENSION = 8


def rows(
    start: int, count: int, rng: random.Random, unique: float, banks: int = 10
) -> list[tuple[Any, ...]]:
    """Rows as the index loads them (``CACHE_ROW_COLUMNS``), dealt to ``banks`` banks in turn."""
    vector = np.ones(DIMENSION, dtype=np.float32).tobytes()
    made = []
    for i in range(start, start + count):
        tags = rng.sample(SUBJECTS, 2) + ([f"proof:{rng.randint(1, 4)}"] if i % 2 else [])
        if rng.random() < unique:
            tags.append(f"cluster:{i:07d}")
        event_id = f"soak-{i:07d}" if i % 2 == 0 else f"fact-{rng.getrandbits(96):024x}"
        fact = "world" if i % 2 else None
        ts_us, bank = 1_700_000_000_000_000 + i, f"bank-{i % banks}"
        made.append((i + 1, event_id, bank, fact, ts_us, 0.5, json.dumps(tags), vector))
    return made


def measure(count: int, unique: float = 0.05, banks: int = 10) -> dict[str, Any]:
    rng = random.Random(1)
    gc.collect()
    tracemalloc.start()
    try:
        vectors = VectorCache(DIMENSION, 0)
        for start in range(0, count, 4096):
            # Made while tracing and dropped after: what stays is what the cache keeps.
            vectors.put(rows(start, min(4096, count - start), rng, unique, banks))
        gc.collect()
        traced, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {
        "documents": count,
        "unique_tags": unique,
        "banks": banks,
        "bytes_per_document": round(traced / count, 1),
        "array_bytes_per_document": round(vectors.nbytes / count, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument(
        "--unique-tags", type=float, default=0.05, help="share of rows with a tag of their own"
    )
    parser.add_argument("--banks", type=int, default=10, help="banks the rows are dealt to")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(args.documents, args.unique_tags, args.banks)
    record("vector_memory", result, argv)
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"{result['documents']:,} documents in {result['banks']} banks"
            f" ({result['unique_tags']:.0%} with a tag of their own):"
            f" {result['bytes_per_document']} bytes each in the vector cache,"
            f" {result['array_bytes_per_document']} of them in arrays"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
