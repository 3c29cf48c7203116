"""The vector cache's search, block by block: the whole-index answer, in bounded memory."""

from __future__ import annotations

import json
import sys
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
from cogsub.index.sqlite.vectors import VectorCache

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
        "name": st.integers(0, 15),  # few names: re-puts, removes and reused slots
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
# A zero query ties every document: the answer is then the slots' order alone.
queries = st.just([0] * DIMENSION) | st.lists(
    st.integers(-3, 3), min_size=DIMENSION, max_size=DIMENSION
)


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


class Reference:
    """The brute-force answer: every live row scored, ties to the earlier slot.

    Slots counted per bank in the order documents came, a forgotten document's slot
    going to the bank's next newcomer (the latest freed first).
    """

    def __init__(self) -> None:
        self.live: dict[tuple[str, str], tuple[int, tuple[Any, ...]]] = {}  # identity -> slot, row
        self.taken: dict[str, int] = {}
        self.free: dict[str, list[int]] = {}

    def put(self, new: tuple[Any, ...]) -> None:
        identity = (new[2], new[1])
        known = self.live.get(identity)
        if known is not None:
            slot = known[0]
        elif self.free.get(new[2]):
            slot = self.free[new[2]].pop()
        else:
            slot = self.taken[new[2]] = self.taken.get(new[2], -1) + 1
        self.live[identity] = (slot, new)

    def remove(self, identity: tuple[str, str]) -> None:
        known = self.live.pop(identity, None)
        if known is not None:
            self.free.setdefault(identity[0], []).append(known[0])

    def search(self, query: np.ndarray, wanted: SearchFilters, size: int) -> list[Any]:
        scored = [
            (-float(np.dot(query, np.frombuffer(r[-1], dtype=np.float32))), slot, r[0])
            for slot, r in self.live.values()
            if passes(r, wanted)
        ]
        return [(doc_id, -negative) for negative, _, doc_id in sorted(scored)[:size]]


@settings(max_examples=300, deadline=None)
@given(steps, filters, queries, st.integers(0, 6))  # small: ties at the cut of a block
def test_search_answers_what_scoring_every_live_document_answers(
    history: list[tuple[bool, dict[str, Any]]],
    wanted: SearchFilters,
    query: list[int],
    size: int,
) -> None:
    vectors, reference = VectorCache(DIMENSION, 0), Reference()
    for doc_id, (remove, document) in enumerate(history, start=1):
        if remove:
            vectors.remove(document["bank"], f"event-{document['name']}")
            reference.remove((document["bank"], f"event-{document['name']}"))
        else:
            vectors.put([row(doc_id, document)])
            reference.put(row(doc_id, document))
    q = np.asarray(query, dtype=np.float32)
    assert vectors.search(q, wanted, size) == reference.search(q, wanted, size)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(documents, min_size=1, max_size=8), min_size=1, max_size=6), filters)
def test_rows_put_in_batches_answer_as_rows_put_one_by_one(
    batches: list[list[dict[str, Any]]], wanted: SearchFilters
) -> None:
    """A batch holds several banks and repeats events: the last row of an event wins."""
    batched, reference = VectorCache(DIMENSION, 0), Reference()
    doc_id = 0
    for batch in batches:
        made = []
        for document in batch:
            doc_id += 1
            made.append(row(doc_id, document))
            reference.put(made[-1])
        batched.put(made)
    query = np.arange(1, DIMENSION + 1, dtype=np.float32)
    assert batched.search(query, wanted, 50) == reference.search(query, wanted, 50)
    assert sorted(batched.tag_sets_holding(wanted.bank_id, TAGS)) == sorted(
        {
            tuple(json.loads(r[6]))
            for _, r in reference.live.values()
            if r[2] == wanted.bank_id and set(json.loads(r[6])) & set(TAGS)
        }
    )


def test_equal_scores_go_to_the_document_that_came_first_in_its_bank() -> None:
    vectors = VectorCache(DIMENSION, 0)
    for doc_id in range(1, 9):  # banks interleaved, every vector the same
        vectors.put([row(doc_id, {**PLAIN, "name": doc_id, "bank": BANKS[doc_id % 2], "axis": 0})])
    query = np.ones(DIMENSION, np.float32)
    assert [d for d, _ in vectors.search(query, SearchFilters(bank_id="a"), 3)] == [2, 4, 6]
    assert [d for d, _ in vectors.search(query, SearchFilters(bank_id="b"), 3)] == [1, 3, 5]


def test_a_freed_slot_goes_to_the_banks_next_newcomer_the_latest_freed_first() -> None:
    vectors = VectorCache(DIMENSION, 0)
    for name in range(3):
        vectors.put([row(name + 1, {**PLAIN, "name": name, "bank": "a", "axis": name})])
    vectors.remove("a", "event-0")  # slot 0
    vectors.remove("a", "event-1")  # slot 1
    vectors.put([row(10, {**PLAIN, "name": 10, "bank": "b", "axis": 3})])  # b's own slot 0
    vectors.put([row(11, {**PLAIN, "name": 11, "bank": "a", "axis": 3})])  # slot 1
    vectors.put([row(12, {**PLAIN, "name": 12, "bank": "a", "axis": 3})])  # slot 0
    found = vectors.search(np.zeros(DIMENSION, np.float32), SearchFilters(bank_id="a"), 5)
    assert [doc_id for doc_id, _ in found] == [12, 11, 3]  # all tie at 0: slot order


def test_a_bank_holds_only_its_own_columns() -> None:
    """A search reads its bank's matrix: a small bank's stays small beside a large one."""
    vectors = VectorCache(DIMENSION, 0)
    vectors.put([row(i, {**PLAIN, "name": i, "bank": "a", "axis": i}) for i in range(5_000)])
    vectors.put([row(i, {**PLAIN, "name": i, "bank": "b", "axis": i}) for i in range(10)])
    assert vectors.banks["b"].columns.shape[1] == 64  # the first size, not 5,010
    assert vectors.banks["a"].columns.shape[1] == 5_000
    assert vectors.used == 5_010
    found = vectors.search(np.ones(DIMENSION, np.float32), SearchFilters(bank_id="b"), 20)
    assert sorted(doc_id for doc_id, _ in found) == list(range(10))


def test_memory_reports_follow_documents_in_and_out() -> None:
    vectors = VectorCache(DIMENSION, 0)
    empty_ids = vectors.id_map_bytes
    vectors.put([row(i, {**PLAIN, "name": i, "bank": BANKS[i % 3], "axis": i}) for i in range(30)])
    arrays, ids = vectors.nbytes, vectors.id_map_bytes
    assert arrays > 30 * DIMENSION * 4 and ids > empty_ids + 30 * 50
    for i in range(30):
        vectors.remove(BANKS[i % 3], f"event-{i}")
    assert vectors.nbytes == arrays  # freed slots wait for reuse
    tables = sum(sys.getsizeof(bank.slot_of) for bank in vectors.banks.values())
    assert vectors.id_map_bytes == sys.getsizeof(vectors.banks) + tables  # no id left


def test_a_bank_never_seen_finds_nothing() -> None:
    vectors = VectorCache(DIMENSION, 0)
    vectors.put([row(1, {**PLAIN, "name": 1, "bank": "a", "axis": 0})])
    assert vectors.search(np.ones(DIMENSION, np.float32), SearchFilters(bank_id="z"), 5) == []


def test_what_a_search_allocates_does_not_grow_with_the_documents() -> None:
    """Whole-index masks and selections took ~20 bytes a document on every search."""
    template = {**PLAIN, "tags": ["red"]}
    query = np.arange(1, DIMENSION + 1, dtype=np.float32)
    wanted = SearchFilters(bank_id="a", tags_any=frozenset({"red"}), min_importance=0.5)
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


def test_a_load_that_reserves_its_banks_never_grows_a_matrix() -> None:
    """Reserved by bank up front, each bank's matrix is allocated once: no copy."""
    vectors, reference = VectorCache(DIMENSION, 0), Reference()
    made = [row(i, {**PLAIN, "name": i, "bank": BANKS[i % 3], "axis": i}) for i in range(3_000)]
    vectors.reserve({bank: 1_000 for bank in BANKS[:3]})
    allocated = {bank: id(vectors.banks[bank].columns) for bank in BANKS[:3]}
    for start in range(0, len(made), 100):
        vectors.put(made[start : start + 100])
    for new in made:
        reference.put(new)
    assert {bank: id(vectors.banks[bank].columns) for bank in BANKS[:3]} == allocated
    assert [vectors.banks[bank].capacity for bank in BANKS[:3]] == [1_125] * 3
    query = np.arange(1, DIMENSION + 1, dtype=np.float32)
    for bank in BANKS[:3]:
        wanted = SearchFilters(bank_id=bank)
        assert vectors.search(query, wanted, 30) == reference.search(query, wanted, 30)
