"""The vector cache's search, block by block: the whole-index answer, in bounded memory."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogsub.core import FactType
from cogsub.index.ports import SearchFilters
from cogsub.index.sqlite import vectors as vectors_module
from cogsub.index.sqlite.vectors import VectorCache, slot_key

DIMENSION = 4
BANKS = ("a", "b", "c")
TAGS = ("red", "blue", "proof:1")
FACTS = (None, "world", "observation")
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
EPOCH_US = int(EPOCH.timestamp() * 1_000_000)


@pytest.fixture(autouse=True)
def small_blocks() -> Iterator[None]:
    """Blocks of a few slots, so a few dozen documents cross many block boundaries."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vectors_module, "SEARCH_BLOCK", 4)
        yield


def one_hot(axis: int) -> bytes:
    """A unit vector a search's scores are exact for (±1 on one axis)."""
    vector = np.zeros(DIMENSION, dtype=np.float32)
    vector[axis % DIMENSION] = 1.0 if axis < DIMENSION else -1.0
    return vector.tobytes()


documents = st.fixed_dictionaries(
    {
        "name": st.integers(0, 40),
        "bank": st.sampled_from(BANKS),
        "fact": st.sampled_from(FACTS),
        "hour": st.integers(0, 5),
        "importance": st.sampled_from([0.0, 0.5, 1.0]),
        "tags": st.lists(st.sampled_from(TAGS), max_size=2, unique=True),
        "axis": st.integers(0, 2 * DIMENSION - 1),
    }
)
steps = st.lists(st.tuples(st.booleans(), documents), min_size=1, max_size=60)
filters = st.builds(
    SearchFilters,
    bank_id=st.sampled_from(BANKS),
    fact_types=st.none() | st.lists(st.sampled_from(list(FactType)), min_size=1, max_size=2),
    since=st.none() | st.integers(0, 5).map(lambda h: EPOCH + timedelta(hours=h)),
    until=st.none() | st.integers(0, 6).map(lambda h: EPOCH + timedelta(hours=h)),
    min_importance=st.none() | st.sampled_from([0.5, 1.0]),
    tags_any=st.none() | st.sets(st.sampled_from(TAGS), min_size=1),
)
queries = st.lists(st.integers(-3, 3), min_size=DIMENSION, max_size=DIMENSION)


#: A document's fields besides its name, bank and axis, where a test does not vary them.
PLAIN: dict[str, Any] = {"fact": None, "hour": 0, "importance": 0.5, "tags": []}


def row(doc_id: int, document: dict[str, Any]) -> tuple[Any, ...]:
    ts_us = EPOCH_US + document["hour"] * 3_600_000_000
    return (
        doc_id,
        f"event-{document['name']}",
        document["bank"],
        document["fact"],
        ts_us,
        document["importance"],
        json.dumps(document["tags"]),
        one_hot(document["axis"]),
    )


def passes(row: tuple[Any, ...], wanted: SearchFilters) -> bool:
    _, _, bank, fact, ts_us, importance, tags, _ = row
    return (
        bank == wanted.bank_id
        and (wanted.fact_types is None or fact in wanted.fact_types)
        and (wanted.since is None or ts_us >= int(wanted.since.timestamp() * 1_000_000))
        and (wanted.until is None or ts_us < int(wanted.until.timestamp() * 1_000_000))
        and (wanted.min_importance is None or importance >= wanted.min_importance)
        and (wanted.tags_any is None or bool(set(json.loads(tags)) & set(wanted.tags_any)))
    )


@settings(max_examples=300, deadline=None)
@given(steps, filters, queries, st.integers(0, 12))
def test_search_answers_what_scoring_every_live_document_answers(
    history: list[tuple[bool, dict[str, Any]]],
    wanted: SearchFilters,
    query: list[int],
    size: int,
) -> None:
    vectors = VectorCache(DIMENSION, 0)
    live: dict[tuple[str, str], tuple[int, tuple[Any, ...]]] = {}  # identity -> (slot, row)
    for doc_id, (remove, document) in enumerate(history, start=1):
        identity = (document["bank"], f"event-{document['name']}")
        if remove:
            vectors.remove(*identity)
            live.pop(identity, None)
        else:
            new = row(doc_id, document)
            vectors.put([new])
            live[identity] = (vectors.slot_of[slot_key(*identity)], new)
    q = np.asarray(query, dtype=np.float32)
    scored = [
        (-float(np.dot(q, np.frombuffer(r[-1], dtype=np.float32))), slot, r[0])
        for slot, r in live.values()
        if passes(r, wanted)
    ]
    expected = [(doc_id, -negative) for negative, _, doc_id in sorted(scored)[:size]]
    assert vectors.search(q, wanted, size) == expected


def test_a_bank_never_seen_finds_nothing() -> None:
    vectors = VectorCache(DIMENSION, 0)
    vectors.put([row(1, {**PLAIN, "name": 1, "bank": "a", "axis": 0})])
    assert vectors.search(np.ones(DIMENSION, np.float32), SearchFilters(bank_id="z"), 5) == []


def test_what_a_search_allocates_does_not_grow_with_the_documents() -> None:
    """Whole-index masks and selections took ~20 bytes a document on every search."""
    template = {**PLAIN, "tags": ["red"]}
    query = np.arange(1, DIMENSION + 1, dtype=np.float32)
    wanted = SearchFilters(bank_id="a", tags_any={"red"}, min_importance=0.5)
    peaks = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vectors_module, "SEARCH_BLOCK", 1024)
        for count in (2_000, 20_000):
            vectors = VectorCache(DIMENSION, 0)
            vectors.put(
                [
                    row(i, {**template, "name": i, "bank": BANKS[i % 2], "axis": i})
                    for i in range(count)
                ]
            )
            tracemalloc.start()
            try:
                found = vectors.search(query, wanted, 10)
                _, peaks[count] = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert len(found) == 10
    # Ten times the documents, the same block's worth: a whole-index pass over the
    # 10,000 candidates of bank "a" alone would be ~200 kB more.
    assert peaks[20_000] < peaks[2_000] + 16_384
