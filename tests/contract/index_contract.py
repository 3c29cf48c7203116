"""The MemoryIndex contract, written once and run against every adapter.

A concrete test class inherits ``MemoryIndexContract`` and provides an
``index_factory`` fixture: a zero-argument callable (sync or async) returning a
NEW MemoryIndex over the same backend each time, so that a test can close one
index and reopen another. The suite calls ``ensure(dimension=...)`` on every
index it opens and closes every index it opened. Bank ids come from
``unique_name``, and event ids start with the bank id, so tests never collide on
a shared backend.

Capabilities, as class attributes a concrete class may override:

- ``supports_vector_search``: ``False`` for backends that cannot run k-NN
  queries (the OpenSearch emulator); vector tests then skip.
- ``durable``: ``False`` when a second index from the factory does not see the
  first one's data (``":memory:"``); reopen and cross-instance tests then skip.
- ``dimension``: the vector dimension of the test documents.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np
import pytest

from cogsub.bulk import update_all
from cogsub.core import ConfigurationError, FactType, IndexDocument, NotFoundError
from cogsub.core.errors import InvalidInputError
from cogsub.core.listing import ListingKey
from cogsub.index.ports import (
    Candidates,
    DecayedPage,
    DecayStep,
    DocumentPatch,
    Hit,
    MemoryIndex,
    NeighbourWindow,
    SearchFilters,
)

IndexFactory = Callable[[], MemoryIndex | Awaitable[MemoryIndex]]
SearchKind = Literal["text", "vector"]

BASE_TIME = datetime(2026, 5, 8, 22, 31, 25, 237000, tzinfo=UTC)

HOSTILE_QUERIES = (
    "",
    "   \t\n ",
    '"',
    '""',
    "*",
    "^",
    "(((",
    ")",
    "NEAR(",
    "NEAR(alpha beta, 2)",
    "AND",
    "OR NOT AND",
    '" OR bank_id:*',
    "bank_id:* OR summary:*",
    "{summary tags}: alpha",
    "alpha*",
    "-alpha +beta",
    '"alpha" NOT "beta"',
    "'; DROP TABLE documents; --",
    "1=1) OR (1=1",
    "\x00\x01\x1f",
    "\ud800 lone surrogate",
    "emoji 🚀🔥 café naïve",
    "a" * 10_000,
    " ".join(f"word{i}" for i in range(500)),
    '{"query": {"match_all": {}}}',
    "bank_id:other AND event_id:x",
    "~!@#$%^&*()_+`-=[]\\{}|;':\",./<>?",
)


def float32_exact(values: Iterable[float]) -> list[float]:
    """Python floats that survive a float32 round trip unchanged."""
    return [float(value) for value in np.asarray(list(values), dtype=np.float32)]


def unit_vector(seed: int, dimension: int) -> list[float]:
    """A deterministic pseudo-random unit vector."""
    raw = np.random.default_rng(seed).standard_normal(dimension)
    return float32_exact(raw / np.linalg.norm(raw))


def angled_vector(cosine: float, dimension: int, *, plane: int = 1) -> list[float]:
    """A unit vector whose cosine with the first axis is ``cosine``."""
    values = [0.0] * dimension
    values[0] = cosine
    values[plane] = math.sqrt(max(0.0, 1.0 - cosine * cosine))
    return float32_exact(values)


def axis(dimension: int) -> list[float]:
    """The first basis vector: the query vector of most vector tests."""
    return angled_vector(1.0, dimension)


def iso(moment: datetime) -> str:
    return (
        moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    )


def make_doc(
    bank_id: str,
    name: str,
    *,
    summary: str = "a plain memory",
    embedding: Sequence[float] | None = None,
    dimension: int = 8,
    timestamp: datetime = BASE_TIME,
    importance: float = 0.5,
    tags: Sequence[str] = (),
    fact_type: FactType | None = None,
    **fields: Any,
) -> IndexDocument:
    """A valid IndexDocument with event id ``{bank_id}-{name}`` (globally unique per test)."""
    event_id = f"{bank_id}-{name}"
    values: dict[str, Any] = {
        "event_id": event_id,
        "timestamp": iso(timestamp),
        "event_type": "user_input",
        "session_id": f"{bank_id}-session",
        "summary": summary,
        "embedding": list(embedding) if embedding is not None else axis(dimension),
        "importance_score": importance,
        "reward_score": 0.5,
        "confidence": 0.5,
        "retrieval_count": 0,
        "decay_factor": 1.0,
        "object_storage_key": f"events/2026/05/08/{event_id}.json",
        "tags": list(tags),
        "bank_id": bank_id,
        "fact_type": fact_type,
    }
    values.update(fields)
    return IndexDocument(**values)


def assert_same_document(actual: IndexDocument | None, expected: IndexDocument) -> None:
    """Equal field for field; embeddings may come back rounded to float32."""
    assert actual is not None
    assert actual.model_dump(exclude={"embedding"}) == expected.model_dump(exclude={"embedding"})
    assert actual.embedding == pytest.approx(expected.embedding, abs=1e-6)


def ids(hits: Sequence[Hit]) -> list[str]:
    return [hit.document.event_id for hit in hits]


class IndexSession:
    """Opens indexes for one test and closes whatever is still open."""

    def __init__(self, factory: IndexFactory, dimension: int) -> None:
        self._factory = factory
        self._dimension = dimension
        self._open: list[MemoryIndex] = []

    async def open(self) -> MemoryIndex:
        made = self._factory()
        index = await made if inspect.isawaitable(made) else made
        self._open.append(index)
        await index.ensure(dimension=self._dimension)
        return index

    async def close(self, index: MemoryIndex) -> None:
        self._open.remove(index)
        await index.close()

    async def close_all(self) -> None:
        for index in reversed(self._open):
            await index.close()
        self._open.clear()


class MemoryIndexContract:
    """Behaviour every MemoryIndex adapter keeps (see ``cogsub.index.ports``)."""

    supports_vector_search = True
    durable = True
    dimension = 8

    @pytest.fixture
    async def session(self, index_factory: IndexFactory) -> AsyncIterator[IndexSession]:
        session = IndexSession(index_factory, self.dimension)
        try:
            yield session
        finally:
            await session.close_all()

    @pytest.fixture
    async def index(self, session: IndexSession) -> MemoryIndex:
        return await session.open()

    @pytest.fixture
    def bank(self, unique_name: str) -> str:
        return unique_name

    @pytest.fixture
    def other_bank(self, unique_name: str) -> str:
        return f"{unique_name}-other"

    @pytest.fixture(params=["text", "vector"])
    def kind(self, request: pytest.FixtureRequest) -> SearchKind:
        kind: SearchKind = request.param
        if kind == "vector":
            self.require_vectors()
        return kind

    def require_vectors(self) -> None:
        if not self.supports_vector_search:
            pytest.skip(f"{type(self).__name__}: this backend cannot run k-NN queries")

    def require_durable(self) -> None:
        if not self.durable:
            pytest.skip(f"{type(self).__name__}: a new index does not see an earlier one's data")

    def doc(self, bank_id: str, name: str, **fields: Any) -> IndexDocument:
        return make_doc(bank_id, name, dimension=self.dimension, **fields)

    async def search(
        self, index: MemoryIndex, kind: SearchKind, filters: SearchFilters, *, size: int = 20
    ) -> list[Hit]:
        """Search for the word ``kiwi`` or near the first axis, whichever ``kind`` says."""
        if kind == "text":
            return await index.search_text("kiwi", filters, size=size)
        return await index.search_vector(axis(self.dimension), filters, size=size)

    # --- writing and reading ---------------------------------------------------------------

    async def test_upsert_then_get_returns_the_document(
        self, index: MemoryIndex, bank: str
    ) -> None:
        docs = [
            self.doc(
                bank,
                "full",
                summary="Compare object storage truth with retrieval metadata",
                embedding=unit_vector(1, self.dimension),
                tags=["memory", "ingestion"],
                fact_type=FactType.PROCEDURE,
                importance=0.81,
                retrieval_count=3,
                decay_factor=0.75,
            ),
            self.doc(bank, "bare", session_id=None, tags=[], fact_type=None),
        ]
        await index.upsert(docs)
        for doc in docs:
            assert_same_document(await index.get(bank, doc.event_id), doc)

    async def test_get_of_a_missing_document_is_none(self, index: MemoryIndex, bank: str) -> None:
        assert await index.get(bank, f"{bank}-never-written") is None

    async def test_present_names_the_bank_s_documents_among_the_ids(
        self, index: MemoryIndex, bank: str, other_bank: str
    ) -> None:
        assert await index.present(bank, []) == set()
        await index.upsert([self.doc(bank, "a"), self.doc(bank, "b"), self.doc(other_bank, "c")])
        asked = [f"{bank}-a", f"{other_bank}-c", f"{bank}-never-written", f"{bank}-a", ""]
        assert await index.present(bank, asked) == {f"{bank}-a"}
        assert await index.present(other_bank, asked) == {f"{other_bank}-c"}
        await index.delete(bank, f"{bank}-a")
        assert await index.present(bank, [f"{bank}-a", f"{bank}-b"]) == {f"{bank}-b"}

    async def test_upsert_is_idempotent_and_replaces_content(
        self, index: MemoryIndex, bank: str
    ) -> None:
        first = self.doc(bank, "same", summary="zebra crossing outside", importance=0.2)
        await index.upsert([first])
        await index.upsert([first])
        assert await index.count(bank) == 1
        second = self.doc(bank, "same", summary="giraffe enclosure inside", importance=0.9)
        await index.upsert([second])
        assert await index.count(bank) == 1
        assert_same_document(await index.get(bank, first.event_id), second)
        assert await index.search_text("zebra", SearchFilters(bank_id=bank), size=5) == []
        hits = await index.search_text("giraffe", SearchFilters(bank_id=bank), size=5)
        assert ids(hits) == [first.event_id]

    async def test_the_text_past_the_summary_is_searched_and_kept(
        self, index: MemoryIndex, bank: str
    ) -> None:
        long = self.doc(
            bank,
            "long",
            summary="Deploy notes for the billing service, step by step",
            detail="last, restart the kubelet on every node and watch the rollout",
        )
        await index.upsert(
            [long, self.doc(bank, "other", summary="lunch with the kubernetes team")]
        )
        assert_same_document(await index.get(bank, long.event_id), long)
        hits = await index.search_text("kubelet rollouts", SearchFilters(bank_id=bank), size=5)
        assert ids(hits) == [long.event_id]

    async def test_a_new_detail_replaces_the_old_one_s_words(
        self, index: MemoryIndex, bank: str
    ) -> None:
        first = self.doc(bank, "same", summary="release notes", detail="the zebra crossing")
        await index.upsert([first])
        second = first.model_copy(update={"detail": "the giraffe enclosure"})
        await index.upsert([second])
        assert_same_document(await index.get(bank, first.event_id), second)
        assert await index.search_text("zebra", SearchFilters(bank_id=bank), size=5) == []
        hits = await index.search_text("giraffe", SearchFilters(bank_id=bank), size=5)
        assert ids(hits) == [first.event_id]

    async def test_upsert_of_many_documents_in_one_call(
        self, index: MemoryIndex, bank: str
    ) -> None:
        docs = [self.doc(bank, f"n{i}", summary=f"batch member number{i}") for i in range(300)]
        await index.upsert(docs)
        assert await index.count(bank) == 300
        hits = await index.search_text("number123", SearchFilters(bank_id=bank), size=5)
        assert ids(hits) == [f"{bank}-n123"]

    async def test_one_event_id_in_two_banks_is_two_independent_documents(
        self, index: MemoryIndex, bank: str, other_bank: str, kind: SearchKind
    ) -> None:
        mine = self.doc(bank, "shared", summary="kiwi belongs to the first bank", importance=0.2)
        theirs = mine.model_copy(update={"bank_id": other_bank, "summary": "kiwi of the second"})
        await index.upsert([mine])
        await index.upsert([theirs])
        assert_same_document(await index.get(bank, mine.event_id), mine)
        assert_same_document(await index.get(other_bank, mine.event_id), theirs)
        assert await index.present(other_bank, [mine.event_id]) == {mine.event_id}
        assert await self.found(index, kind, bank) == {"shared"}
        await index.update(other_bank, mine.event_id, DocumentPatch(retrieval_count_increment=4))
        assert (await index.get(bank, mine.event_id)).retrieval_count == mine.retrieval_count  # type: ignore[union-attr]
        assert await index.delete_many(other_bank, [mine.event_id]) == 1
        assert await index.get(other_bank, mine.event_id) is None
        assert_same_document(await index.get(bank, mine.event_id), mine)
        assert await self.found(index, kind, bank) == {"shared"}
        assert await self.found(index, kind, other_bank) == set()
        # Both in one call: still two documents.
        await index.upsert([mine, theirs])
        assert await index.count(bank) == 1
        assert await index.count(other_bank) == 1

    async def test_embedding_of_another_dimension_is_refused(
        self, index: MemoryIndex, bank: str
    ) -> None:
        good = self.doc(bank, "good")
        bad = self.doc(bank, "bad", embedding=[1.0] * (self.dimension + 1))
        with pytest.raises(ConfigurationError):
            await index.upsert([good, bad])
        assert await index.count(bank) == 0

    async def test_ensure_is_idempotent_and_refuses_another_dimension(
        self, index: MemoryIndex, bank: str
    ) -> None:
        await index.ensure(dimension=self.dimension)
        await index.upsert([self.doc(bank, "kept")])
        with pytest.raises(ConfigurationError):
            await index.ensure(dimension=self.dimension * 2)
        await index.ensure(dimension=self.dimension)
        assert await index.count(bank) == 1

    # --- bank isolation --------------------------------------------------------------------

    async def test_a_document_is_invisible_from_another_bank(
        self, index: MemoryIndex, bank: str, other_bank: str
    ) -> None:
        doc = self.doc(bank, "secret", summary="kiwi secret launch codes", tags=["kiwi"])
        await index.upsert([doc])
        assert await index.get(other_bank, doc.event_id) is None
        assert await index.count(other_bank) == 0
        assert await index.delete(other_bank, doc.event_id) is False
        with pytest.raises(NotFoundError):
            await index.update(other_bank, doc.event_id, DocumentPatch(importance_score=0.0))
        other = SearchFilters(bank_id=other_bank)
        for query in ("kiwi secret launch codes", doc.event_id, f"{bank} kiwi", '" OR bank_id:*'):
            assert await index.search_text(query, other, size=10) == []
        assert_same_document(await index.get(bank, doc.event_id), doc)

    async def test_vector_search_never_crosses_banks(
        self, index: MemoryIndex, bank: str, other_bank: str
    ) -> None:
        self.require_vectors()
        await index.upsert([self.doc(bank, "mine", embedding=axis(self.dimension))])
        await index.upsert([self.doc(other_bank, "theirs", embedding=axis(self.dimension))])
        hits = await index.search_vector(axis(self.dimension), SearchFilters(bank_id=bank), size=10)
        assert ids(hits) == [f"{bank}-mine"]
        empty = SearchFilters(bank_id=f"{bank}-nobody")
        assert await index.search_vector(axis(self.dimension), empty, size=10) == []

    async def test_count_per_bank_and_in_all_banks(
        self, index: MemoryIndex, bank: str, other_bank: str
    ) -> None:
        before = await index.count()
        await index.upsert([self.doc(bank, f"c{i}") for i in range(3)])
        await index.upsert([self.doc(other_bank, f"c{i}") for i in range(2)])
        assert await index.count(bank) == 3
        assert await index.count(other_bank) == 2
        assert await index.count() == before + 5

    # --- text search -----------------------------------------------------------------------

    async def test_bm25_ranks_documents_with_the_query_words_first(
        self, index: MemoryIndex, bank: str
    ) -> None:
        await index.upsert(
            [
                self.doc(bank, "both", summary="rollback of the billing service after deploy"),
                self.doc(bank, "one", summary="the billing team had lunch"),
                self.doc(bank, "none", summary="a walk in the park with the dog"),
                self.doc(bank, "noise1", summary="weather report for the weekend"),
                self.doc(bank, "noise2", summary="notes about a book on gardening"),
            ]
        )
        hits = await index.search_text("billing rollback", SearchFilters(bank_id=bank), size=10)
        assert ids(hits) == [f"{bank}-both", f"{bank}-one"]
        assert hits[0].score > hits[1].score > 0

    async def test_stemming_finds_other_forms_of_a_word(
        self, index: MemoryIndex, bank: str
    ) -> None:
        await index.upsert(
            [
                self.doc(bank, "past", summary="We deployed the billing service on Friday"),
                self.doc(bank, "other", summary="Coffee with the design team"),
            ]
        )
        hits = await index.search_text("deploying", SearchFilters(bank_id=bank), size=10)
        assert ids(hits) == [f"{bank}-past"]

    async def test_text_search_ignores_case_punctuation_and_stop_words(
        self, index: MemoryIndex, bank: str
    ) -> None:
        await index.upsert(
            [
                self.doc(bank, "hq", summary="Acme HQ is in Berlin."),
                self.doc(bank, "other", summary="The office is in a city"),
            ]
        )
        hits = await index.search_text("Where is ACME's HQ?!", SearchFilters(bank_id=bank), size=5)
        assert ids(hits)[:1] == [f"{bank}-hq"]

    async def test_operator_words_are_plain_words(self, index: MemoryIndex, bank: str) -> None:
        await index.upsert(
            [
                self.doc(bank, "near", summary="we met near the old bridge"),
                self.doc(bank, "far", summary="the cabin is far away"),
            ]
        )
        for query in ("NEAR(", "near", '"NEAR"', "NEAR AND OR"):
            hits = await index.search_text(query, SearchFilters(bank_id=bank), size=5)
            assert ids(hits) == [f"{bank}-near"], query

    async def test_hostile_query_strings_never_raise_nor_leak(
        self, index: MemoryIndex, bank: str, other_bank: str
    ) -> None:
        await index.upsert(
            [
                self.doc(bank, "a", summary="alpha beta gamma"),
                self.doc(other_bank, "b", summary="alpha beta gamma documents bank_id summary"),
            ]
        )
        for query in HOSTILE_QUERIES:
            hits = await index.search_text(query, SearchFilters(bank_id=bank), size=10)
            assert set(ids(hits)) <= {f"{bank}-a"}, query
        assert await index.count(bank) == 1
        assert await index.count(other_bank) == 1

    async def test_a_query_without_words_has_no_hits(self, index: MemoryIndex, bank: str) -> None:
        await index.upsert([self.doc(bank, "any", summary="something to find")])
        for query in ("", "   ", "?!", "*", '"" ()'):
            assert await index.search_text(query, SearchFilters(bank_id=bank), size=5) == []

    # --- vector search ---------------------------------------------------------------------

    async def test_vector_search_orders_by_cosine(self, index: MemoryIndex, bank: str) -> None:
        self.require_vectors()
        cosines = {"c90": 0.9, "c50": 0.5, "c10": 0.1, "cneg": -0.4, "c99": 0.99}
        await index.upsert(
            [
                self.doc(bank, name, embedding=angled_vector(c, self.dimension))
                for name, c in cosines.items()
            ]
        )
        hits = await index.search_vector(axis(self.dimension), SearchFilters(bank_id=bank), size=10)
        expected = sorted(cosines, key=lambda name: -cosines[name])
        assert ids(hits) == [f"{bank}-{name}" for name in expected]
        scores = [hit.score for hit in hits]
        assert scores == sorted(scores, reverse=True)
        assert scores[0] > scores[-1]

    async def test_vector_search_does_not_need_a_unit_query(
        self, index: MemoryIndex, bank: str
    ) -> None:
        self.require_vectors()
        await index.upsert(
            [
                self.doc(bank, "x", embedding=angled_vector(0.95, self.dimension)),
                self.doc(bank, "y", embedding=angled_vector(0.2, self.dimension)),
            ]
        )
        query = [3.0 * value for value in axis(self.dimension)]
        hits = await index.search_vector(query, SearchFilters(bank_id=bank), size=2)
        assert ids(hits) == [f"{bank}-x", f"{bank}-y"]

    async def test_vector_query_of_the_wrong_length_is_invalid(
        self, index: MemoryIndex, bank: str
    ) -> None:
        self.require_vectors()
        await index.upsert([self.doc(bank, "v")])
        with pytest.raises(InvalidInputError):
            await index.search_vector(
                [1.0] * (self.dimension + 3), SearchFilters(bank_id=bank), size=3
            )

    # --- filters (text and vector) ---------------------------------------------------------

    async def filter_corpus(self, index: MemoryIndex, bank: str) -> None:
        """Six documents that all match ``kiwi`` and sit near the first axis."""

        def kiwi(name: str, cosine: float, **fields: Any) -> IndexDocument:
            summary = f"kiwi note {name}"
            return self.doc(
                bank,
                name,
                summary=summary,
                embedding=angled_vector(cosine, self.dimension),
                **fields,
            )

        await index.upsert(
            [
                kiwi("world", 0.99, fact_type=FactType.WORLD, tags=["red"], importance=0.9),
                kiwi(
                    "proc",
                    0.95,
                    fact_type=FactType.PROCEDURE,
                    tags=["blue", "red"],
                    importance=0.5,
                    timestamp=BASE_TIME + timedelta(hours=1),
                ),
                kiwi(
                    "pref",
                    0.9,
                    fact_type=FactType.PREFERENCE,
                    tags=["green"],
                    importance=0.2,
                    timestamp=BASE_TIME + timedelta(hours=2),
                ),
                kiwi(
                    "none",
                    0.85,
                    fact_type=None,
                    tags=[],
                    importance=0.7,
                    timestamp=BASE_TIME - timedelta(days=30),
                ),
                kiwi(
                    "exact",
                    0.8,
                    fact_type=FactType.WORLD,
                    tags=["Red"],
                    importance=0.5,
                    timestamp=BASE_TIME + timedelta(hours=3),
                ),
                kiwi(
                    "late",
                    0.75,
                    fact_type=FactType.EXPERIENCE,
                    tags=["blue"],
                    importance=1.0,
                    timestamp=BASE_TIME + timedelta(days=365),
                ),
            ]
        )

    async def found(
        self, index: MemoryIndex, kind: SearchKind, bank: str, **filters: Any
    ) -> set[str]:
        hits = await self.search(index, kind, SearchFilters(bank_id=bank, **filters))
        assert all(hit.document.bank_id == bank for hit in hits)
        return {hit.document.event_id.removeprefix(f"{bank}-") for hit in hits}

    async def test_no_filter_finds_the_whole_bank(
        self, index: MemoryIndex, bank: str, kind: SearchKind
    ) -> None:
        await self.filter_corpus(index, bank)
        assert await self.found(index, kind, bank) == {
            "world",
            "proc",
            "pref",
            "none",
            "exact",
            "late",
        }

    async def test_filter_by_fact_types(
        self, index: MemoryIndex, bank: str, kind: SearchKind
    ) -> None:
        await self.filter_corpus(index, bank)
        world = frozenset({FactType.WORLD})
        assert await self.found(index, kind, bank, fact_types=world) == {"world", "exact"}
        two = frozenset({FactType.PROCEDURE, FactType.PREFERENCE})
        assert await self.found(index, kind, bank, fact_types=two) == {"proc", "pref"}
        unused = frozenset({FactType.CORRECTION})
        assert await self.found(index, kind, bank, fact_types=unused) == set()

    async def test_filter_by_any_of_the_tags_exactly(
        self, index: MemoryIndex, bank: str, kind: SearchKind
    ) -> None:
        await self.filter_corpus(index, bank)
        assert await self.found(index, kind, bank, tags_any=frozenset({"red"})) == {"world", "proc"}
        either = frozenset({"green", "blue"})
        assert await self.found(index, kind, bank, tags_any=either) == {"proc", "pref", "late"}
        assert await self.found(index, kind, bank, tags_any=frozenset({"re"})) == set()

    async def test_since_is_inclusive_and_until_exclusive(
        self, index: MemoryIndex, bank: str, kind: SearchKind
    ) -> None:
        await self.filter_corpus(index, bank)
        one_hour = BASE_TIME + timedelta(hours=1)
        three_hours = BASE_TIME + timedelta(hours=3)
        assert await self.found(index, kind, bank, since=one_hour, until=three_hours) == {
            "proc",
            "pref",
        }
        assert await self.found(index, kind, bank, since=three_hours) == {"exact", "late"}
        assert await self.found(index, kind, bank, until=BASE_TIME) == {"none"}
        assert await self.found(index, kind, bank, since=one_hour, until=one_hour) == set()

    async def test_filter_by_minimum_importance_inclusive(
        self, index: MemoryIndex, bank: str, kind: SearchKind
    ) -> None:
        await self.filter_corpus(index, bank)
        assert await self.found(index, kind, bank, min_importance=0.7) == {"world", "none", "late"}
        assert await self.found(index, kind, bank, min_importance=0.5) == {
            "world",
            "proc",
            "none",
            "exact",
            "late",
        }

    async def test_filters_combine(self, index: MemoryIndex, bank: str, kind: SearchKind) -> None:
        await self.filter_corpus(index, bank)
        found = await self.found(
            index,
            kind,
            bank,
            fact_types=frozenset({FactType.WORLD, FactType.PROCEDURE, FactType.EXPERIENCE}),
            tags_any=frozenset({"red", "blue"}),
            since=BASE_TIME,
            until=BASE_TIME + timedelta(days=30),
            min_importance=0.5,
        )
        assert found == {"world", "proc"}

    async def test_empty_filter_sets_match_nothing(
        self, index: MemoryIndex, bank: str, kind: SearchKind
    ) -> None:
        await self.filter_corpus(index, bank)
        assert await self.found(index, kind, bank, fact_types=frozenset()) == set()
        assert await self.found(index, kind, bank, tags_any=frozenset()) == set()

    async def test_size_is_respected(self, index: MemoryIndex, bank: str, kind: SearchKind) -> None:
        await self.filter_corpus(index, bank)
        assert len(await self.search(index, kind, SearchFilters(bank_id=bank), size=3)) == 3
        assert len(await self.search(index, kind, SearchFilters(bank_id=bank), size=1)) == 1
        assert await self.search(index, kind, SearchFilters(bank_id=bank), size=0) == []
        assert len(await self.search(index, kind, SearchFilters(bank_id=bank), size=100)) == 6

    async def test_hits_are_best_first(
        self, index: MemoryIndex, bank: str, kind: SearchKind
    ) -> None:
        await self.filter_corpus(index, bank)
        hits = await self.search(index, kind, SearchFilters(bank_id=bank), size=10)
        scores = [hit.score for hit in hits]
        assert scores == sorted(scores, reverse=True)
        if kind == "vector":
            assert ids(hits)[:3] == [f"{bank}-world", f"{bank}-proc", f"{bank}-pref"]

    # --- update, delete --------------------------------------------------------------------

    async def test_scan_walks_the_bank_in_id_order_with_a_cursor(
        self, index: MemoryIndex, bank: str
    ) -> None:
        names = [f"m{i:02d}" for i in range(7)]
        await index.upsert(
            [make_doc(bank, name, dimension=self.dimension) for name in reversed(names)]
        )
        await index.upsert([make_doc(f"{bank}x", "m00", dimension=self.dimension)])
        seen: list[str] = []
        after: str | None = None
        while page := await index.scan(SearchFilters(bank_id=bank), size=3, after=after):
            assert len(page) <= 3
            seen += [doc.event_id for doc in page]
            after = page[-1].event_id
        assert seen == [f"{bank}-{name}" for name in names]

    async def test_scan_applies_the_filters(self, index: MemoryIndex, bank: str) -> None:
        await self.filter_corpus(index, bank)

        async def scanned(**filters: Any) -> list[str]:
            docs = await index.scan(SearchFilters(bank_id=bank, **filters), size=50)
            return [doc.event_id.removeprefix(f"{bank}-") for doc in docs]

        assert await scanned() == sorted(["world", "proc", "pref", "none", "exact", "late"])
        assert await scanned(fact_types=frozenset({FactType.WORLD})) == ["exact", "world"]
        assert await scanned(tags_any=frozenset({"blue"})) == ["late", "proc"]
        assert await scanned(since=BASE_TIME + timedelta(hours=2)) == ["exact", "late", "pref"]
        assert await scanned(fact_types=frozenset()) == []

    # --- listing ---------------------------------------------------------------------------

    async def listed(
        self, index: MemoryIndex, filters: SearchFilters, *, size: int, **options: Any
    ) -> list[IndexDocument]:
        """Every page of ``list_newest`` in turn, each cursor the last document handed out."""
        seen: list[IndexDocument] = []
        after: ListingKey | None = None
        while page := await index.list_newest(filters, size=size, after=after, **options):
            assert len(page) <= size
            seen += page
            after = ListingKey(page[-1].timestamp, page[-1].event_id)
        return seen

    async def test_list_newest_walks_the_bank_newest_first_with_a_cursor(
        self, index: MemoryIndex, bank: str
    ) -> None:
        # Three share a timestamp: the id breaks the tie, descending.
        offsets = {"a": 0, "b": 5, "c": 5, "d": 5, "e": -3, "f": 9, "g": 1}
        docs = [
            self.doc(bank, name, timestamp=BASE_TIME + timedelta(minutes=m))
            for name, m in offsets.items()
        ]
        await index.upsert(docs)
        await index.upsert([make_doc(f"{bank}x", "a", dimension=self.dimension)])
        seen = await self.listed(index, SearchFilters(bank_id=bank), size=3)
        names = [doc.event_id.removeprefix(f"{bank}-") for doc in seen]
        assert names == ["f", "d", "c", "b", "g", "a", "e"]
        assert all(doc.bank_id == bank and doc.embedding == [] for doc in seen)
        assert await index.list_newest(SearchFilters(bank_id=bank), size=0) == []

    async def test_list_newest_applies_the_filters_and_leaves_the_superseded_out(
        self, index: MemoryIndex, bank: str
    ) -> None:
        await self.filter_corpus(index, bank)
        await index.upsert([self.doc(bank, "old", tags=["red", f"superseded-by:{bank}-world"])])

        async def listed(**filters: Any) -> list[str]:
            options = {"include_superseded": filters.pop("include_superseded", False)}
            docs = await self.listed(
                index, SearchFilters(bank_id=bank, **filters), size=2, **options
            )
            return [doc.event_id.removeprefix(f"{bank}-") for doc in docs]

        assert await listed() == ["late", "exact", "pref", "proc", "world", "none"]
        assert await listed(include_superseded=True) == [
            "late", "exact", "pref", "proc", "world", "old", "none"
        ]  # fmt: skip
        assert await listed(fact_types=frozenset({FactType.WORLD})) == ["exact", "world"]
        assert await listed(tags_any=frozenset({"red"})) == ["proc", "world"]
        assert await listed(tags_any=frozenset({"red"}), include_superseded=True) == [
            "proc", "world", "old"
        ]  # fmt: skip
        assert await listed(since=BASE_TIME + timedelta(hours=2)) == ["late", "exact", "pref"]
        assert await listed(until=BASE_TIME + timedelta(hours=2)) == ["proc", "world", "none"]
        assert await listed(fact_types=frozenset()) == []

    async def test_list_newest_leaves_older_procedure_versions_out_as_recall_does(
        self, index: MemoryIndex, bank: str, other_bank: str
    ) -> None:
        def version(name: str, pid: str, number: int, minutes: int, *tags: str) -> IndexDocument:
            at = BASE_TIME + timedelta(minutes=minutes)
            tags = (f"procedure:{pid}", f"version:{number}", *tags)
            return self.doc(bank, name, timestamp=at, tags=tags, fact_type=FactType.PROCEDURE)

        # Versions need not be newest by time; another bank's later version is not this bank's.
        await index.upsert(
            [
                version("d1", "deploy", 1, 9, "red"),
                version("d2", "deploy", 2, 8, "red"),
                version("d3", "deploy", 3, 1),
                version("b1", "backup", 1, 7, "red"),
                *(
                    self.doc(bank, f"p{i}", timestamp=BASE_TIME + timedelta(minutes=6))
                    for i in (1, 2)
                ),
                make_doc(
                    other_bank,
                    "d9",
                    dimension=self.dimension,
                    tags=["procedure:backup", "version:9"],
                ),
            ]
        )

        async def listed(size: int, **options: Any) -> list[str]:
            tags = options.pop("tags_any", None)
            filters = SearchFilters(bank_id=bank, tags_any=tags)
            docs = await self.listed(index, filters, size=size, **options)
            return [doc.event_id.removeprefix(f"{bank}-") for doc in docs]

        for size in (1, 2, 5):
            assert await listed(size) == ["b1", "p2", "p1", "d3"]
        every = await listed(2, include_superseded=True)
        assert every == ["d1", "d2", "b1", "p2", "p1", "d3"]
        # The newest version is the bank's, whatever the filters let through.
        assert await listed(2, tags_any=frozenset({"red"})) == ["b1"]

    async def test_list_newest_lists_once_what_stays_while_others_come_and_go(
        self, index: MemoryIndex, bank: str
    ) -> None:
        stay = [
            self.doc(bank, f"s{i}", timestamp=BASE_TIME + timedelta(minutes=i)) for i in range(9)
        ]
        gone = [
            self.doc(bank, f"g{i}", timestamp=BASE_TIME + timedelta(minutes=i)) for i in range(9)
        ]
        await index.upsert([*stay, *gone])
        filters = SearchFilters(bank_id=bank)
        seen: list[str] = []
        after: ListingKey | None = None
        step = 0
        while page := await index.list_newest(filters, size=2, after=after):
            seen += [doc.event_id for doc in page]
            after = ListingKey(page[-1].timestamp, page[-1].event_id)
            # Between pages: one goes, and two come, one on each side of the cursor.
            await index.delete(bank, gone[step % 9].event_id)
            at = BASE_TIME + timedelta(minutes=8 - step, seconds=30)
            await index.upsert([self.doc(bank, f"n{step}", timestamp=at)])
            await index.upsert(
                [self.doc(bank, f"z{step}", timestamp=BASE_TIME + timedelta(days=1))]
            )
            step += 1
        assert len(seen) == len(set(seen))
        assert {doc.event_id for doc in stay} <= set(seen)

    async def test_bank_counts_summarise_each_bank_in_id_order(
        self, index: MemoryIndex, bank: str
    ) -> None:
        await self.filter_corpus(index, bank)
        await index.upsert(
            [make_doc(f"{bank}-b", "x", dimension=self.dimension, fact_type=FactType.WORLD)]
        )
        await index.upsert([make_doc(f"{bank}-c", "y", dimension=self.dimension)])
        await index.delete(f"{bank}-c", f"{bank}-c-y")
        wanted = [bank, f"{bank}-b", f"{bank}-c", f"{bank}-nothing"]
        found = await index.bank_counts(wanted, size=10)
        assert [summary.bank_id for summary in found] == [bank, f"{bank}-b"]
        first = found[0]
        assert dict(first.counts) == {
            FactType.WORLD: 2,
            FactType.PROCEDURE: 1,
            FactType.PREFERENCE: 1,
            FactType.EXPERIENCE: 1,
            None: 1,
        }
        assert first.total == 6
        late = await index.get(bank, f"{bank}-late")
        assert late is not None and first.newest_at == late.timestamp
        assert dict(found[1].counts) == {FactType.WORLD: 1}
        paged = await index.bank_counts(wanted, size=1)
        assert [summary.bank_id for summary in paged] == [bank]
        rest = await index.bank_counts(wanted, size=5, after=bank)
        assert [summary.bank_id for summary in rest] == [f"{bank}-b"]
        assert await index.bank_counts([], size=5) == []
        walked: list[str] = []
        after: str | None = None
        while page := await index.bank_counts(size=2, after=after):
            walked += [summary.bank_id for summary in page]
            after = page[-1].bank_id
        assert walked == sorted(walked) and len(set(walked)) == len(walked)
        assert {bank, f"{bank}-b"} <= set(walked) and f"{bank}-c" not in walked

    async def replay_corpus(self, index: MemoryIndex, bank: str) -> list[IndexDocument]:
        """Documents of mixed types whose replay order is neither id nor insertion order."""
        signals = [  # name, decay_factor, importance, fact type
            ("a", 0.5, 0.9, FactType.WORLD),
            ("b", 1.0, 0.1, FactType.EXPERIENCE),
            ("c", 1.0, 0.7, FactType.WORLD),
            ("d", 0.5, 0.9, None),
            ("e", 0.05, 1.0, FactType.PREFERENCE),
            ("f", 1.0, 0.7, FactType.EXPERIENCE),
            ("g", 0.25, 0.3, FactType.WORLD),
        ]
        docs = [
            make_doc(
                bank,
                name,
                dimension=self.dimension,
                decay_factor=decay,
                importance=importance,
                fact_type=fact,
                tags=["blue"] if name in "bdg" else [],
            )
            for name, decay, importance, fact in signals
        ]
        await index.upsert(docs)
        await index.upsert([make_doc(f"{bank}x", "c", dimension=self.dimension)])
        return docs

    async def test_scan_in_replay_order_walks_the_most_alive_first_with_a_cursor(
        self, index: MemoryIndex, bank: str
    ) -> None:
        await self.replay_corpus(index, bank)
        seen: list[str] = []
        after: IndexDocument | None = None
        filters = SearchFilters(bank_id=bank)
        while page := await index.scan_in_replay_order(filters, size=2, after=after):
            assert len(page) <= 2
            seen += [doc.event_id.removeprefix(f"{bank}-") for doc in page]
            after = page[-1]
        assert seen == ["c", "f", "b", "a", "d", "g", "e"]

    async def test_scan_in_replay_order_applies_the_filters_and_follows_patches(
        self, index: MemoryIndex, bank: str
    ) -> None:
        await self.replay_corpus(index, bank)

        async def replayed(size: int = 50, **filters: Any) -> list[str]:
            docs = await index.scan_in_replay_order(
                SearchFilters(bank_id=bank, **filters), size=size
            )
            return [doc.event_id.removeprefix(f"{bank}-") for doc in docs]

        world_or_experience = frozenset({FactType.WORLD, FactType.EXPERIENCE})
        assert await replayed(fact_types=world_or_experience) == ["c", "f", "b", "a", "g"]
        assert await replayed(3, fact_types=world_or_experience) == ["c", "f", "b"]
        assert await replayed(tags_any=frozenset({"blue"})) == ["b", "d", "g"]
        assert await replayed(min_importance=0.7) == ["c", "f", "a", "d", "e"]
        assert await replayed(fact_types=frozenset()) == []
        assert await replayed(0) == []
        await index.update(bank, f"{bank}-e", DocumentPatch(decay_factor=1.0))
        await index.update_many(bank, {f"{bank}-c": DocumentPatch(decay_factor=0.1)})
        assert await replayed(3) == ["e", "f", "b"]

    async def conversation(self, index: MemoryIndex, bank: str) -> list[IndexDocument]:
        """Turns t0..t7 one second apart in one session (t3 and t4 at the same second),
        another session's turns in between, and a twin session in another bank."""
        seconds = [0, 1, 2, 3, 3, 5, 6, 7]
        turns = [
            make_doc(
                bank,
                f"t{i}",
                dimension=self.dimension,
                timestamp=BASE_TIME + timedelta(seconds=at),
                fact_type=FactType.WORLD if i != 6 else FactType.PREFERENCE,
                tags=["late"] if i >= 6 else [],
            )
            for i, at in enumerate(seconds)
        ]
        other = [
            make_doc(
                bank,
                f"o{i}",
                dimension=self.dimension,
                timestamp=BASE_TIME + timedelta(seconds=i, milliseconds=500),
                session_id=f"{bank}-other",
            )
            for i in range(8)
        ]
        twin = [
            make_doc(
                f"{bank}x",
                f"t{i}",
                dimension=self.dimension,
                timestamp=BASE_TIME + timedelta(seconds=i),
                session_id=f"{bank}-session",
            )
            for i in range(8)
        ]
        await index.upsert([*reversed(turns), *other])
        await index.upsert(twin)
        return turns

    async def test_neighbours_are_the_turns_around_each_anchor_in_its_session(
        self, index: MemoryIndex, bank: str
    ) -> None:
        turns = await self.conversation(index, bank)
        everything = SearchFilters(bank_id=bank)

        async def around(anchors: Sequence[int], each_side: int, **filters: Any) -> list[str]:
            found = await index.neighbours(
                SearchFilters(bank_id=bank, **filters),
                [turns[i] for i in anchors],
                each_side=each_side,
            )
            assert all(doc.bank_id == bank for doc in found)
            return sorted(doc.event_id.removeprefix(f"{bank}-") for doc in found)

        assert await around([3], 1) == ["t2", "t4"]  # t4 shares t3's second: after it by id
        assert await around([4], 2) == ["t2", "t3", "t5", "t6"]
        assert await around([0], 2) == ["t1", "t2"]  # nothing before the first turn
        assert await around([7], 3) == ["t4", "t5", "t6"]
        assert await around([2, 3], 1) == ["t1", "t4"]  # anchors are not their own neighbours
        assert await around([3], 0) == []
        assert await around([5], 1, fact_types=frozenset({FactType.WORLD})) == ["t4", "t7"]
        assert await around([5], 1, tags_any=frozenset({"late"})) == ["t6"]
        assert await around([5], 1, until=BASE_TIME + timedelta(seconds=6)) == ["t4"]
        assert await around([5], 1, tags_any=frozenset()) == []
        found = await index.neighbours(everything, [turns[1], turns[1]], each_side=1)
        assert sorted(doc.event_id for doc in found) == [f"{bank}-t0", f"{bank}-t2"]
        assert_same_document(next(doc for doc in found if doc.event_id == f"{bank}-t0"), turns[0])

    async def test_neighbours_stay_within_reach_and_skip_what_the_caller_has(
        self, index: MemoryIndex, bank: str
    ) -> None:
        turns = await self.conversation(index, bank)

        async def around(anchor: int, **options: Any) -> list[str]:
            found = await index.neighbours(
                SearchFilters(bank_id=bank), [turns[anchor]], each_side=2, **options
            )
            return sorted(doc.event_id.removeprefix(f"{bank}-") for doc in found)

        assert await around(5) == ["t3", "t4", "t6", "t7"]
        # t4 is 2 s before t5 (t3 too), t6 is 1 s after and t7 2 s after.
        assert await around(5, within_s=1.5) == ["t6"]
        assert await around(5, within_s=2.0) == ["t3", "t4", "t6", "t7"]
        # Excluded turns are not returned, and the next ones do not move up in their place.
        assert await around(5, exclude={f"{bank}-t4", f"{bank}-t6"}) == ["t3", "t7"]

    async def test_neighbours_never_cross_banks_or_come_without_a_session(
        self, index: MemoryIndex, bank: str
    ) -> None:
        turns = await self.conversation(index, bank)
        # An anchor of this bank asked about under another bank's filters finds nothing.
        assert (
            await index.neighbours(SearchFilters(bank_id=f"{bank}x"), [turns[2]], each_side=3) == []
        )
        loose = make_doc(bank, "loose", dimension=self.dimension, session_id=None)
        await index.upsert([loose])
        assert await index.neighbours(SearchFilters(bank_id=bank), [loose], each_side=3) == []
        assert await index.neighbours(SearchFilters(bank_id=bank), [], each_side=3) == []

    # --- recall's one trip ------------------------------------------------------------------

    def vector_pool(self, size: int) -> int:
        """``size``, or 0 where the backend cannot run k-NN (its text half is still checked)."""
        return size if self.supports_vector_search else 0

    async def recall_conversation(self, index: MemoryIndex, bank: str) -> list[IndexDocument]:
        """``conversation`` with a kiwi in two turns and vectors of every angle to the axis."""
        turns = await self.conversation(index, bank)
        said = {2: "kiwi and melon", 6: "a kiwi tree", 0: "melon"}
        changed = [
            turn.model_copy(
                update={
                    "summary": said.get(i, turn.summary),
                    "embedding": angled_vector(1.0 - i / 10, self.dimension),
                }
            )
            for i, turn in enumerate(turns)
        ]
        await index.upsert(changed)
        return changed

    async def assert_candidates_are_the_separate_calls(
        self,
        index: MemoryIndex,
        found: Candidates,
        filters: SearchFilters,
        pools: tuple[int, int],
        window: NeighbourWindow,
    ) -> None:
        text = await index.search_text("kiwi melon", filters, size=pools[0])
        vector = await index.search_vector(axis(self.dimension), filters, size=pools[1])
        top = window.anchors_each
        anchors = {h.document.event_id: h.document for h in (*text[:top], *vector[:top])}
        near = await index.neighbours(
            filters,
            list(anchors.values()),
            each_side=window.each_side,
            within_s=window.within_s,
            exclude=set(ids(text)) | set(ids(vector)),
        )
        assert ids(found.text) == ids(text)
        assert [h.score for h in found.text] == pytest.approx([h.score for h in text], rel=1e-6)
        assert ids(found.vector) == ids(vector)
        assert [h.score for h in found.vector] == pytest.approx([h.score for h in vector], abs=1e-6)
        assert [d.event_id for d in found.neighbours] == [d.event_id for d in near]
        expected = [*(h.document for h in (*text, *vector)), *near]
        returned = [*(h.document for h in (*found.text, *found.vector)), *found.neighbours]
        for doc, want in zip(returned, expected, strict=True):
            assert doc.embedding == []  # its vector is a row of the matrix instead
            assert doc == want.model_copy(update={"embedding": []})
            row = found.embeddings.rows_of([want.event_id])
            assert row is not None
            assert row[0].tolist() == pytest.approx(want.embedding, abs=1e-6)
        assert found.embeddings.matrix.dtype == np.float32

    async def test_recall_candidates_equal_the_separate_calls(
        self, index: MemoryIndex, bank: str
    ) -> None:
        await self.recall_conversation(index, bank)
        window = NeighbourWindow(anchors_each=1, each_side=1)
        for filters in (
            SearchFilters(bank_id=bank),
            SearchFilters(bank_id=bank, fact_types=frozenset({FactType.WORLD})),
            SearchFilters(bank_id=bank, until=BASE_TIME + timedelta(seconds=6)),
        ):
            pools = (5, self.vector_pool(3))
            found = await index.recall_candidates(
                "kiwi melon",
                axis(self.dimension),
                filters,
                text_pool=pools[0],
                vector_pool=pools[1],
                neighbours=window,
            )
            assert found.text, "the text half found nothing to compare"
            assert found.neighbours, "no neighbour came back to compare"
            await self.assert_candidates_are_the_separate_calls(
                index, found, filters, pools, window
            )

    async def test_recall_candidates_without_a_window_read_no_neighbours(
        self, index: MemoryIndex, bank: str, other_bank: str
    ) -> None:
        await self.recall_conversation(index, bank)
        found = await index.recall_candidates(
            "kiwi", axis(self.dimension), SearchFilters(bank_id=bank), text_pool=5, vector_pool=0
        )
        assert sorted(ids(found.text)) == [f"{bank}-t2", f"{bank}-t6"]
        assert found.vector == [] and found.neighbours == [] and found.newest_versions == {}
        assert len(found.embeddings.rows) == 2
        nothing = await index.recall_candidates(
            "kiwi",
            axis(self.dimension),
            SearchFilters(bank_id=bank, tags_any=frozenset()),
            text_pool=5,
            vector_pool=self.vector_pool(5),
        )
        assert nothing.text == [] and nothing.vector == [] and nothing.embeddings.rows == {}
        elsewhere = await index.recall_candidates(
            "kiwi",
            axis(self.dimension),
            SearchFilters(bank_id=other_bank),
            text_pool=5,
            vector_pool=self.vector_pool(5),
            neighbours=NeighbourWindow(anchors_each=3, each_side=3),
        )
        assert elsewhere.text == [] and elsewhere.vector == [] and elsewhere.neighbours == []

    async def test_recall_candidates_name_the_newest_version_of_each_procedure_found(
        self, index: MemoryIndex, bank: str, other_bank: str
    ) -> None:
        def procedure(name: str, pid: str, version: int, summary: str) -> IndexDocument:
            tags = [f"procedure:{pid}", f"version:{version}"]
            return self.doc(bank, name, summary=summary, tags=tags, fact_type=FactType.PROCEDURE)

        await index.upsert(
            [
                procedure("d1", "deploy", 1, "deploy with kiwi"),
                procedure("d2", "deploy", 2, "ship it"),
                procedure("d3", "deploy", 3, "ship it again"),
                procedure("b1", "backup", 4, "backup with kiwi"),
                procedure("r1", "restore", 9, "restore quietly"),
                self.doc(bank, "plain", summary="kiwi salad", fact_type=FactType.WORLD),
                # Another bank's later version is not this bank's.
                make_doc(
                    other_bank,
                    "d9",
                    dimension=self.dimension,
                    tags=["procedure:deploy", "version:9"],
                ),
            ]
        )
        # Versions are looked up over the whole bank: not only among the world facts asked for.
        for types in (None, frozenset({FactType.PROCEDURE}), frozenset({FactType.WORLD})):
            found = await index.recall_candidates(
                "kiwi",
                axis(self.dimension),
                SearchFilters(bank_id=bank, fact_types=types),
                text_pool=10,
                vector_pool=0,
                procedure_versions=True,
            )
            procedures = types is None or FactType.PROCEDURE in types
            assert found.newest_versions == ({"deploy": 3, "backup": 4} if procedures else {})
        asked_not = await index.recall_candidates(
            "kiwi", axis(self.dimension), SearchFilters(bank_id=bank), text_pool=10, vector_pool=0
        )
        assert asked_not.newest_versions == {}

    async def test_recall_candidates_check_the_vector_as_search_vector_does(
        self, index: MemoryIndex, bank: str
    ) -> None:
        await index.upsert([self.doc(bank, "a", summary="kiwi")])
        filters = SearchFilters(bank_id=bank)
        with pytest.raises(InvalidInputError):
            await index.recall_candidates("kiwi", [1.0, 0.0], filters, text_pool=5, vector_pool=5)
        if not self.supports_vector_search:
            # A backend without k-NN says so in our terms, as search_vector does.
            with pytest.raises(ConfigurationError):
                await index.recall_candidates(
                    "kiwi", axis(self.dimension), filters, text_pool=5, vector_pool=5
                )

    async def test_recall_candidates_see_a_second_instance_s_writes(
        self, session: IndexSession, bank: str
    ) -> None:
        self.require_durable()
        self.require_vectors()
        first, second = await session.open(), await session.open()
        near = self.doc(bank, "near", summary="no shared words", embedding=axis(self.dimension))
        filters = SearchFilters(bank_id=bank)

        async def found() -> list[str]:
            got = await first.recall_candidates(
                "kiwi", axis(self.dimension), filters, text_pool=5, vector_pool=5
            )
            return ids(got.vector)

        assert await found() == []
        await second.upsert([near])
        assert await found() == [near.event_id]
        await second.delete(bank, near.event_id)
        assert await found() == []

    async def test_update_changes_only_the_patched_signals(
        self, index: MemoryIndex, bank: str
    ) -> None:
        doc = self.doc(bank, "u", importance=0.4, retrieval_count=2, decay_factor=0.9)
        await index.upsert([doc])
        updated = await index.update(
            bank, doc.event_id, DocumentPatch(importance_score=0.8, decay_factor=0.5)
        )
        expected = doc.model_copy(update={"importance_score": 0.8, "decay_factor": 0.5})
        assert_same_document(updated, expected)
        assert_same_document(await index.get(bank, doc.event_id), expected)
        counted = await index.update(bank, doc.event_id, DocumentPatch(retrieval_count=7))
        assert counted.retrieval_count == 7
        bumped = await index.update(bank, doc.event_id, DocumentPatch(retrieval_count_increment=3))
        assert bumped.retrieval_count == 10
        assert bumped.importance_score == 0.8
        assert await index.update(bank, doc.event_id, DocumentPatch()) == bumped

    async def test_concurrent_increments_all_count(self, index: MemoryIndex, bank: str) -> None:
        doc = self.doc(bank, "hot")
        await index.upsert([doc])
        patch = DocumentPatch(retrieval_count_increment=1)
        await asyncio.gather(*(index.update(bank, doc.event_id, patch) for _ in range(20)))
        fetched = await index.get(bank, doc.event_id)
        assert fetched is not None
        assert fetched.retrieval_count == 20

    async def test_update_many_patches_each_document_and_skips_the_missing(
        self, index: MemoryIndex, bank: str, other_bank: str
    ) -> None:
        docs = [self.doc(bank, f"m{i}", importance=0.2, retrieval_count=i) for i in range(3)]
        foreign = self.doc(other_bank, "m-foreign", importance=0.2)
        await index.upsert([*docs, foreign])
        patches = {
            docs[0].event_id: DocumentPatch(decay_factor=0.5),
            docs[1].event_id: DocumentPatch(retrieval_count_increment=4, importance_score=0.9),
            f"{bank}-ghost": DocumentPatch(decay_factor=0.1),
            foreign.event_id: DocumentPatch(decay_factor=0.1),  # another bank's: left alone
        }
        assert await index.update_many(bank, patches) == 2
        first, second, third = [await index.get(bank, d.event_id) for d in docs]
        assert first is not None and first.decay_factor == 0.5
        assert second is not None
        assert (second.retrieval_count, second.importance_score) == (5, 0.9)
        assert third is not None
        assert_same_document(third, docs[2])
        assert_same_document(await index.get(other_bank, foreign.event_id), foreign)
        filters = SearchFilters(bank_id=bank, min_importance=0.8)
        assert [d.event_id for d in await index.scan(filters, size=5)] == [docs[1].event_id]
        assert await index.update_many(bank, {}) == 0

    async def test_update_all_patches_several_banks_and_none_crosses_over(
        self, index: MemoryIndex, bank: str, other_bank: str
    ) -> None:
        # ``update_all`` takes the adapter's ``update_across`` where there is one.
        ours, theirs = self.doc(bank, "m"), self.doc(other_bank, "m2")
        await index.upsert([ours, theirs])
        patches = {
            bank: {
                ours.event_id: DocumentPatch(add_tags=("proof:2",)),
                theirs.event_id: DocumentPatch(decay_factor=0.1),  # another bank's: left alone
            },
            other_bank: {theirs.event_id: DocumentPatch(decay_factor=0.5)},
            f"{bank}-empty": {},
        }
        assert await update_all(index, patches) == 2  # the cross-bank id is skipped
        mine = await index.get(bank, ours.event_id)
        other = await index.get(other_bank, theirs.event_id)
        assert mine is not None and mine.tags == [*ours.tags, "proof:2"]
        assert other is not None and other.decay_factor == 0.5
        assert await update_all(index, {}) == 0

    async def test_a_tag_patch_replaces_tags_under_a_prefix_and_keeps_other_signals(
        self, index: MemoryIndex, bank: str, kind: SearchKind
    ) -> None:
        await self.filter_corpus(index, bank)
        await self.search(index, kind, SearchFilters(bank_id=bank))  # warm any cache first
        pref = f"{bank}-pref"
        await index.update(bank, pref, DocumentPatch(decay_factor=0.5, retrieval_count=3))
        recount = DocumentPatch(add_tags=("proof:2",), drop_tags_under=("proof:", "gre"))
        assert await index.update_many(bank, {pref: recount}) == 1
        again = DocumentPatch(add_tags=("proof:3",), drop_tags_under=("proof:",))
        patched = await index.update(bank, pref, again)

        stored = await index.get(bank, pref)
        assert stored is not None and stored == patched
        assert stored.tags == ["proof:3"]  # "green" went with the "gre" prefix the first time
        assert (stored.decay_factor, stored.retrieval_count) == (0.5, 3)
        assert await self.found(index, kind, bank, tags_any=frozenset({"proof:3"})) == {"pref"}
        assert await self.found(index, kind, bank, tags_any=frozenset({"proof:2"})) == set()
        assert await self.found(index, kind, bank, tags_any=frozenset({"green"})) == set()

    async def test_update_of_a_missing_document_raises_not_found(
        self, index: MemoryIndex, bank: str
    ) -> None:
        with pytest.raises(NotFoundError):
            await index.update(bank, f"{bank}-ghost", DocumentPatch(retrieval_count_increment=1))

    async def test_updated_importance_is_what_filters_see(
        self, index: MemoryIndex, bank: str, kind: SearchKind
    ) -> None:
        await self.filter_corpus(index, bank)
        await self.search(index, kind, SearchFilters(bank_id=bank))  # warm any cache first
        await index.update(bank, f"{bank}-pref", DocumentPatch(importance_score=0.95))
        await index.update(bank, f"{bank}-world", DocumentPatch(importance_score=0.1))
        assert await self.found(index, kind, bank, min_importance=0.9) == {"pref", "late"}

    async def test_decay_pages_walk_the_bank_and_decay_only_old_memories_above_the_floor(
        self, index: MemoryIndex, bank: str, other_bank: str
    ) -> None:
        old = BASE_TIME - timedelta(days=3)
        docs = [
            self.doc(bank, "a", timestamp=old, retrieval_count=2, tags=["t"]),
            self.doc(bank, "b", timestamp=old, decay_factor=0.5, importance=0.9),
            self.doc(bank, "c", timestamp=BASE_TIME),  # new this epoch: left alone
            self.doc(bank, "d", timestamp=old, decay_factor=0.05),  # at the floor
            self.doc(bank, "e", timestamp=old, decay_factor=0.01),  # below it
            self.doc(bank, "f", timestamp=old, decay_factor=0.06),  # down to the floor
        ]
        foreign = self.doc(other_bank, "a", timestamp=old)
        await index.upsert([*docs, foreign])
        step = DecayStep(rate=0.5, floor=0.05, before=BASE_TIME)
        pages, after = [], None
        while (page := await index.decay_page(bank, step, size=2, after=after)).last is not None:
            pages.append(page)
            after = page.last
        assert pages == [
            DecayedPage(2, f"{bank}-b"),
            DecayedPage(0, f"{bank}-d"),
            DecayedPage(1, f"{bank}-f"),
        ]
        expected = [0.5, 0.25, 1.0, 0.05, 0.01, 0.05]
        for doc, factor in zip(docs, expected, strict=True):
            stored = await index.get(bank, doc.event_id)
            assert stored is not None
            assert stored.decay_factor == factor
            assert_same_document(stored.model_copy(update={"decay_factor": doc.decay_factor}), doc)
        assert_same_document(await index.get(other_bank, foreign.event_id), foreign)
        replayed = await index.scan_in_replay_order(SearchFilters(bank_id=bank), size=2)
        assert [d.event_id for d in replayed] == [f"{bank}-c", f"{bank}-a"]

    async def test_decay_pages_compute_each_factor_as_the_step_does_to_the_last_bit(
        self, index: MemoryIndex, bank: str
    ) -> None:
        # Values whose products round: an engine that stores fewer digits drifts from them.
        start = [1.0, 0.9, 0.81, 0.729, 0.59049, 1 / 3]
        old = BASE_TIME - timedelta(days=9)
        docs = [self.doc(bank, f"m{i}", timestamp=old, decay_factor=f) for i, f in enumerate(start)]
        await index.upsert(docs)
        step = DecayStep(rate=0.9, floor=0.05, before=BASE_TIME)
        expected = list(start)
        for _ in range(3):
            assert await index.decay_page(bank, step, size=10) == DecayedPage(6, f"{bank}-m5")
            expected = [step.applied_to(f) for f in expected]
        stored = [await index.get(bank, d.event_id) for d in docs]
        assert [d.decay_factor if d else None for d in stored] == expected

    async def test_a_decay_page_past_the_end_changes_nothing_and_needs_a_size(
        self, index: MemoryIndex, bank: str
    ) -> None:
        doc = self.doc(bank, "a", timestamp=BASE_TIME - timedelta(days=1))
        await index.upsert([doc])
        step = DecayStep(rate=0.9, floor=0.05, before=BASE_TIME)
        assert await index.decay_page(bank, step, size=5, after=doc.event_id) == DecayedPage(
            0, None
        )
        assert await index.decay_page(f"{bank}-empty", step, size=5) == DecayedPage(0, None)
        assert_same_document(await index.get(bank, doc.event_id), doc)
        keeping = DecayStep(rate=1.0, floor=0.05, before=BASE_TIME)  # changes no factor
        assert await index.decay_page(bank, keeping, size=5) == DecayedPage(0, doc.event_id)
        assert_same_document(await index.get(bank, doc.event_id), doc)
        for size in (0, -1):
            with pytest.raises(InvalidInputError):
                await index.decay_page(bank, step, size=size)

    async def test_delete_removes_the_document_everywhere(
        self, index: MemoryIndex, bank: str, kind: SearchKind
    ) -> None:
        await self.filter_corpus(index, bank)
        await self.search(index, kind, SearchFilters(bank_id=bank))  # warm any cache first
        assert await index.delete(bank, f"{bank}-world") is True
        assert await index.delete(bank, f"{bank}-world") is False
        assert await index.get(bank, f"{bank}-world") is None
        assert await index.count(bank) == 5
        assert "world" not in await self.found(index, kind, bank)
        await index.upsert([self.doc(bank, "world", summary="kiwi again", importance=0.3)])
        assert "world" in await self.found(index, kind, bank)

    async def test_delete_many_removes_only_the_banks_listed_documents(
        self, index: MemoryIndex, bank: str, other_bank: str, kind: SearchKind
    ) -> None:
        await self.filter_corpus(index, bank)
        await self.filter_corpus(index, other_bank)
        await self.search(index, kind, SearchFilters(bank_id=bank))  # warm any cache first
        listed = [
            f"{bank}-world",
            f"{bank}-proc",
            f"{bank}-world",  # a repeat counts once
            f"{other_bank}-pref",  # another bank's id: never deleted
            f"{bank}-never-written",
            f"{other_bank}-late",
        ]
        assert await index.delete_many(bank, listed) == 2
        assert await index.get(bank, f"{bank}-world") is None
        assert await index.get(bank, f"{bank}-proc") is None
        assert await index.count(bank) == 4
        assert await self.found(index, kind, bank) == {"pref", "none", "exact", "late"}
        assert await index.count(other_bank) == 6
        assert len(await self.found(index, kind, other_bank)) == 6
        assert await index.get(other_bank, f"{other_bank}-pref") is not None
        assert await index.delete_many(bank, listed) == 0  # the rest are not this bank's

    async def test_delete_many_of_nothing_or_of_unknown_ids_is_zero(
        self, index: MemoryIndex, bank: str
    ) -> None:
        assert await index.delete_many(bank, []) == 0
        assert await index.delete_many(bank, [f"{bank}-ghost", "", "x" * 300]) == 0
        await index.upsert([self.doc(bank, "kept")])
        assert await index.delete_many(bank, []) == 0
        assert await index.delete_many(bank, [f"{bank}-ghost"]) == 0
        assert await index.count(bank) == 1

    async def test_delete_many_of_a_long_list(
        self, index: MemoryIndex, bank: str, other_bank: str
    ) -> None:
        # Longer than any adapter's request (OpenSearch: 500 ids per mget and _bulk).
        docs = [self.doc(bank, f"n{i:04d}", summary=f"long list member{i}") for i in range(1_100)]
        await index.upsert(docs)
        await index.upsert([self.doc(other_bank, f"n{i:04d}") for i in range(0, 1_100, 7)])
        listed = [doc.event_id for doc in docs[:1_050]]
        # Unknown and other-bank ids spread over every chunk.
        listed[::9] = [f"{other_bank}-n{i:04d}" for i in range(0, 1_050, 9)]
        removed = 1_050 - len(listed[::9])
        listed += [f"{bank}-unknown{i}" for i in range(200)]
        assert await index.delete_many(bank, listed) == removed
        assert await index.count(bank) == 1_100 - removed
        assert await index.count(other_bank) == len(range(0, 1_100, 7))
        hits = await index.search_text("member1075", SearchFilters(bank_id=bank), size=5)
        assert ids(hits) == [f"{bank}-n1075"]
        assert await index.search_text("member1", SearchFilters(bank_id=bank), size=5) == []
        assert await index.get(bank, f"{bank}-n0009") is not None  # its id was not listed

    # --- durability and several instances -------------------------------------------------

    async def test_documents_survive_a_reopen(
        self, session: IndexSession, bank: str, kind: SearchKind
    ) -> None:
        self.require_durable()
        first = await session.open()
        await self.filter_corpus(first, bank)
        await first.update(bank, f"{bank}-proc", DocumentPatch(retrieval_count_increment=4))
        await first.delete(bank, f"{bank}-late")
        await session.close(first)
        second = await session.open()
        assert await second.count(bank) == 5
        proc = await second.get(bank, f"{bank}-proc")
        assert proc is not None
        assert proc.retrieval_count == 4
        assert await self.found(second, kind, bank) == {"world", "proc", "pref", "none", "exact"}

    async def test_a_second_instance_sees_the_first_ones_writes(
        self, session: IndexSession, bank: str, kind: SearchKind
    ) -> None:
        self.require_durable()
        writer, reader = await session.open(), await session.open()
        await self.filter_corpus(writer, bank)
        assert len(await self.found(reader, kind, bank)) == 6
        await writer.delete(bank, f"{bank}-world")
        await writer.update(bank, f"{bank}-pref", DocumentPatch(importance_score=0.99))
        await writer.upsert([self.doc(bank, "fresh", summary="kiwi fresh", importance=0.98)])
        assert await self.found(reader, kind, bank, min_importance=0.98) == {
            "pref",
            "fresh",
            "late",
        }
        assert "world" not in await self.found(reader, kind, bank)

    async def test_a_second_instance_sees_the_first_ones_delete_many(
        self, session: IndexSession, bank: str, kind: SearchKind
    ) -> None:
        self.require_durable()
        writer, reader = await session.open(), await session.open()
        await self.filter_corpus(writer, bank)
        assert len(await self.found(reader, kind, bank)) == 6  # the reader's caches are warm
        assert await writer.delete_many(bank, [f"{bank}-world", f"{bank}-late"]) == 2
        assert await self.found(reader, kind, bank) == {"proc", "pref", "none", "exact"}
        assert await reader.count(bank) == 4

    async def test_interleaved_writers_see_each_other(
        self, session: IndexSession, bank: str, kind: SearchKind
    ) -> None:
        self.require_durable()
        first, second = await session.open(), await session.open()
        await first.upsert([self.doc(bank, "a1", summary="kiwi one")])
        assert await self.found(first, kind, bank) == {"a1"}
        await second.upsert([self.doc(bank, "b1", summary="kiwi two")])
        await first.upsert([self.doc(bank, "a2", summary="kiwi three")])
        assert await self.found(first, kind, bank) == {"a1", "b1", "a2"}
        assert await self.found(second, kind, bank) == {"a1", "b1", "a2"}
