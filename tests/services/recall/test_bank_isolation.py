"""Bank isolation as a property: no read of one bank ever returns another bank's memory.

Memories are retained into several banks through the real MemoryService over a
live embedded stack, with texts, tags and timestamps that overlap on purpose
(every query matches documents of every bank). Then recall, get and feedback
run in each bank with random filters and hostile query strings (query DSL, SQL,
wildcards, traversal), and every answer is checked against what was retained
into that bank: ids, object keys, the bank in the answer, and the filters.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cogsub.core.errors import NotFoundError
from cogsub.core.events import FactType
from cogsub.core.listing import MemoryListFilters
from cogsub.core.memory import FeedbackRequest, FeedbackSignal, RecallRequest, RetainRequest
from cogsub.core.topics import EXPERIENCE_RAW_DLQ
from cogsub.embeddings.hash import HashEmbedder
from cogsub.index.opensearch import OpenSearchMemoryIndex
from cogsub.index.ports import SearchFilters
from cogsub.lifecycle.forget import Forgetting
from cogsub.lifecycle.listing import MemoryBrowser
from cogsub.recall import MemoryService
from tests.fixtures.opensearch import OpenSearchEndpoint
from tests.services.recall.stack import LiveStack, live_stack

WORDS = ["deploy", "billing", "secret", "password", "jane", "berlin", "kafka", "rollback", "plan"]
TAGS = ["ops", "billing", "secret", "*", "' OR 1=1 --", '{"match_all":{}}', "a:b", "ünï"]
HOSTILE_QUERIES = [
    "*",
    "?",
    "' OR 1=1 --",
    "' OR '1'='1",
    '"; DROP TABLE documents; --',
    "1 UNION SELECT body FROM documents",
    '{"match_all":{}}',
    '{"bool":{"should":[{"match_all":{}}]}}',
    "bank_id:* OR bank_id:other",
    "secret OR password AND NOT x",
    '"secret password"~5',
    "NEAR(secret password)",
    "secret*",
    "-secret",
    "(",
    ")",
    '"',
    "\\",
    "%",
    "_",
    "../../",
    "%2e%2e",
    "\x00",
    "日本語 🙂",
    " ",
    "x" * 4_096,
]
BANK_NAMES = [
    "bank",
    "Bank",
    "BANK",
    "bank-1",
    "bank_1",
    "bank.1",
    "bank:1",
    "bank@x",
    "b",
    "_",
    "0",
]
START = datetime(2025, 1, 1, tzinfo=UTC)
T = TypeVar("T")

texts = st.one_of(
    st.lists(st.sampled_from(WORDS + HOSTILE_QUERIES[:14]), min_size=1, max_size=8).map(" ".join),
    st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=60),
)
moments = st.integers(min_value=0, max_value=600).map(lambda days: START + timedelta(days=days))
queries = st.one_of(
    st.sampled_from(HOSTILE_QUERIES),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40),
)


def mostly_none(strategy: st.SearchStrategy[T]) -> st.SearchStrategy[T | None]:
    """None three times in four: most recalls return many memories, so the property has work."""
    return st.integers(min_value=0, max_value=3).flatmap(
        lambda n: strategy if n == 0 else st.none()
    )


fact_type_filters = mostly_none(st.lists(st.sampled_from(list(FactType)), max_size=4))
tag_filters = mostly_none(st.lists(st.sampled_from(TAGS), max_size=3))


@st.composite
def recall_requests(draw: st.DrawFn) -> RecallRequest:
    since, until = draw(mostly_none(moments)), draw(mostly_none(moments))
    return RecallRequest(
        query=draw(queries),
        types=draw(fact_type_filters),
        tags=draw(tag_filters),
        since=since,
        until=until,
        k=draw(st.sampled_from([100, 50, 10]) | st.integers(min_value=1, max_value=100)),
        max_tokens=draw(mostly_none(st.integers(min_value=1, max_value=400))),
        all_versions=draw(st.booleans()),
        reinforce=draw(st.booleans()),
    )


@dataclass(frozen=True)
class Kept:
    """What was retained: enough to recognise a memory and check filters against it."""

    object_storage_key: str
    fact_type: FactType | None


@dataclass
class Registry:
    """Every memory retained into the stack so far, by bank and by id."""

    banks: dict[str, dict[str, Kept]] = field(default_factory=dict)
    counter: int = 0
    checked: dict[str, int] = field(default_factory=dict)

    def owners(self, memory_id: str) -> list[str]:
        return [b for b, kept in self.banks.items() if memory_id in kept]

    def count(self, what: str, n: int = 1) -> None:
        self.checked[what] = self.checked.get(what, 0) + n

    async def retain(self, service: MemoryService, bank: str, request: RetainRequest) -> None:
        result = await service.retain(bank, request)
        assert result.recallable, f"{request.memory_id} never became recallable in {bank}"
        kept = Kept(result.object_storage_key, request.fact_type)
        self.banks.setdefault(bank, {})[result.memory_id] = kept


async def check_recall(
    service: MemoryService, registry: Registry, bank: str, request: RecallRequest
) -> None:
    """Every hit is this bank's, with this bank's object key, and within the filters."""
    response = await service.recall(bank, request)
    own = registry.banks.get(bank, {})
    assert response.bank_id == bank
    for hit in response.results:
        assert hit.id in own, f"{bank} recalled {hit.id} of {registry.owners(hit.id)}"
        assert hit.object_storage_key == own[hit.id].object_storage_key
        assert hit.fact_type == own[hit.id].fact_type
        assert hit.source_event_id in own
        if request.types is not None:
            assert hit.fact_type in request.types
        if request.tags is not None:
            assert set(hit.tags) & set(request.tags)
        moment = datetime.fromisoformat(hit.timestamp)
        assert request.since is None or moment >= request.since
        assert request.until is None or moment < request.until
    unfiltered = (request.types, request.tags, request.since, request.until) == (None,) * 4
    if own and unfiltered and request.max_tokens is None:
        assert response.results, "the vector side always finds something in a non-empty bank"
    registry.count("recalls")
    registry.count("hits", len(response.results))


async def check_reads_by_id(
    service: MemoryService, stack: LiveStack, registry: Registry, bank: str, memory_id: str
) -> None:
    """Get and feedback by id: this bank's id works, another bank's is not found and untouched."""
    owners = registry.owners(memory_id)
    if bank in owners:
        record = await service.get_memory(bank, memory_id)
        assert (record.bank_id, record.id) == (bank, memory_id)
        assert record.object_storage_key == registry.banks[bank][memory_id].object_storage_key
        assert record.archived_event["bankId"] == bank
        registry.count("own gets")
        return
    with pytest.raises(NotFoundError):
        await service.get_memory(bank, memory_id)
    await service.drain()  # pending reinforcement from earlier recalls lands first
    before = [await stack.index.get(owner, memory_id) for owner in owners]
    request = FeedbackRequest(memory_ids=[memory_id], signal=FeedbackSignal.HELPFUL)
    with pytest.raises(NotFoundError):
        await service.feedback(bank, request)
    after = [await stack.index.get(owner, memory_id) for owner in owners]
    assert None not in before and None not in after
    assert [a.retrieval_count for a in after] == [b.retrieval_count for b in before]  # type: ignore[union-attr]
    registry.count("foreign gets and feedbacks")


async def check_listing(stack: LiveStack, registry: Registry, bank: str, limit: int) -> None:
    """A walk of the bank's pages lists exactly what was retained into it, and nothing else."""
    browser = MemoryBrowser(archive=stack.archive, index=stack.index)
    own = registry.banks.get(bank, {})
    seen: list[str] = []
    cursor = None
    while True:
        page = await browser.memories(bank, MemoryListFilters(cursor=cursor, limit=limit))
        for record in page.memories:
            assert record.bank_id == bank and record.id in own, f"{bank} listed {record.id}"
            assert record.object_storage_key == own[record.id].object_storage_key
        seen += [record.id for record in page.memories]
        if (cursor := page.next_cursor) is None:
            break
    assert sorted(seen) == sorted(own)
    registry.count("listings")


# -- a seeded corpus, built once, probed by many hypothesis queries ----------------------------


def seeded_requests(
    seed: int, banks: list[str], per_bank: int
) -> Iterator[tuple[str, RetainRequest]]:
    """The same words, tags and days in every bank, so every query matches every bank."""
    rng = random.Random(seed)
    for n in range(per_bank):
        for bank in banks:
            words = rng.sample(WORDS, 3) + [rng.choice(HOSTILE_QUERIES[:14])]
            yield (
                bank,
                RetainRequest(
                    content=" ".join(words),
                    fact_type=rng.choice([None, *FactType]),
                    tags=rng.sample(TAGS, rng.randint(0, 3)),
                    timestamp=START + timedelta(days=rng.randint(0, 600)),
                    # Ids that say nothing about their bank: nothing may rely on naming.
                    memory_id=f"m{rng.getrandbits(40):x}-{n}",
                    wait=True,
                ),
            )


@dataclass
class Corpus:
    stack: LiveStack
    service: MemoryService
    registry: Registry


@pytest.fixture
async def corpus(data_dir: Path) -> AsyncIterator[Corpus]:
    """Four banks (two differ only by case) of twelve memories each, over a live stack."""
    async with live_stack(data_dir) as stack:
        registry = Registry()
        for bank, request in seeded_requests(7, ["alpha", "beta", "Beta", "gamma.1"], 12):
            await registry.retain(stack.service, bank, request)
        yield Corpus(stack, stack.service, registry)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_recall_get_and_feedback_never_cross_banks(
    corpus: Corpus, data: st.DataObject
) -> None:
    banks = sorted(corpus.registry.banks)
    bank = data.draw(st.sampled_from(banks + ["delta", "ALPHA"]), label="bank")
    await check_recall(corpus.service, corpus.registry, bank, data.draw(recall_requests()))
    every_id = sorted(i for kept in corpus.registry.banks.values() for i in kept)
    memory_id = data.draw(st.sampled_from(every_id), label="memory_id")
    await check_reads_by_id(corpus.service, corpus.stack, corpus.registry, bank, memory_id)
    limit = data.draw(st.integers(min_value=1, max_value=20), label="page limit")
    await check_listing(corpus.stack, corpus.registry, bank, limit)


# -- random corpora: banks, ids, texts, tags and types all drawn by hypothesis -------------------


def safe_ids(first: str, rest: str, longest: int) -> st.SearchStrategy[str]:
    """Ids the API accepts: a safe first character, then safe ones, never ``..``."""
    pattern = f"[{first}][{rest}]{{0,{longest - 1}}}"
    return st.from_regex(pattern, fullmatch=True).filter(lambda i: ".." not in i)


bank_ids = st.sampled_from(BANK_NAMES) | safe_ids("a-z0-9", "a-z0-9_.:@+-", 13)
# A few ids come up again and again, so banks keep choosing the same ones.
COMMON_IDS = ["invoice-7", "shared", "m:1", "a"]


@st.composite
def corpora(draw: st.DrawFn) -> list[tuple[str, RetainRequest]]:
    """2-4 banks of 0-4 memories each, with hostile texts and shared tags."""
    banks = draw(st.lists(bank_ids, min_size=2, max_size=4, unique=True))
    items = []
    for bank in banks:
        # Unique within a bank (another content under a taken id is a conflict), often
        # the same as another bank's.
        chosen = draw(
            st.lists(
                st.none()
                | st.sampled_from(COMMON_IDS)
                | safe_ids("A-Za-z0-9_", "A-Za-z0-9_.:@+-", 9),
                max_size=4,
                unique_by=lambda i: i if i is not None else object(),
            )
        )
        for memory_id in chosen:
            request = RetainRequest(
                content=draw(texts),
                fact_type=draw(st.none() | st.sampled_from(list(FactType))),
                tags=draw(st.lists(st.sampled_from(TAGS), max_size=3, unique=True)),
                timestamp=draw(st.none() | moments),
                memory_id=memory_id,
                wait=True,
            )
            items.append((bank, request))
    return items


@pytest.fixture
async def empty(data_dir: Path) -> AsyncIterator[Corpus]:
    """A live stack with nothing in it yet; hypothesis examples fill it one after another."""
    async with live_stack(data_dir) as stack:
        yield Corpus(stack, stack.service, Registry())


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(items=corpora(), probes=st.lists(recall_requests(), min_size=3, max_size=6))
async def test_random_banks_and_memories_stay_apart(
    empty: Corpus, items: list[tuple[str, RetainRequest]], probes: list[RecallRequest]
) -> None:
    registry = empty.registry  # grows over the examples: later ones see earlier banks too
    registry.counter += 1
    for bank, request in items:
        if request.memory_id is not None:
            # Fresh in each example (a bank's taken id with other content is a conflict),
            # shared between the banks of one example.
            fresh = f"{request.memory_id}-{registry.counter}"
            request = request.model_copy(update={"memory_id": fresh})
        await registry.retain(empty.service, bank, request)
    banks = sorted(registry.banks) or ["nobody"]
    every_id = sorted(i for kept in registry.banks.values() for i in kept)
    for n, probe in enumerate(probes):
        bank = banks[n % len(banks)]
        await check_recall(empty.service, registry, bank, probe)
        if every_id:
            memory_id = every_id[(n * 7) % len(every_id)]
            await check_reads_by_id(empty.service, empty.stack, registry, bank, memory_id)


async def test_the_same_memory_id_in_two_banks_is_two_memories(data_dir: Path) -> None:
    """Each bank's ``invoice-7`` is archived, indexed, recalled and forgotten on its own."""
    async with live_stack(data_dir) as stack:
        service = stack.service
        bob = await service.retain(
            "bob",
            RetainRequest(
                content="invoice seven: bob owes 40 EUR", memory_id="invoice-7", wait=True
            ),
        )
        alice = await service.retain(
            "alice",
            RetainRequest(content="invoice seven: alice paid", memory_id="invoice-7", wait=True),
        )
        assert bob.recallable and alice.recallable
        assert bob.object_storage_key != alice.object_storage_key
        assert (
            await service.get_memory("bob", "invoice-7")
        ).text == "invoice seven: bob owes 40 EUR"
        assert (await service.get_memory("alice", "invoice-7")).text == "invoice seven: alice paid"
        recalled = await service.recall("alice", RecallRequest(query="invoice seven"))
        assert [(h.id, h.text) for h in recalled.results] == [
            ("invoice-7", "invoice seven: alice paid")
        ]
        assert (await stack.bus.topic_stats(EXPERIENCE_RAW_DLQ)).end_offset == 0
        forgetting = Forgetting(archive=stack.archive, index=stack.index)
        await forgetting.forget("bob", "invoice-7", actor="test")
        with pytest.raises(NotFoundError):
            await service.get_memory("bob", "invoice-7")
        assert (await service.get_memory("alice", "invoice-7")).text == "invoice seven: alice paid"
        recalled = await service.recall("alice", RecallRequest(query="invoice seven"))
        assert [h.id for h in recalled.results] == ["invoice-7"]
        assert await stack.archive.exists(alice.object_storage_key)
        assert not await stack.archive.exists(bob.object_storage_key)


# -- the same property on OpenSearch (text search only: the emulator has no k-NN) ---------------


@pytest.fixture
async def opensearch_copy(
    corpus: Corpus, opensearch_endpoint: OpenSearchEndpoint, opensearch_index_name: str
) -> AsyncIterator[OpenSearchMemoryIndex]:
    """The seeded corpus's index documents, copied as they are into an OpenSearch index."""
    index = opensearch_endpoint.memory_index(opensearch_index_name)
    await index.ensure(dimension=HashEmbedder().dimension)
    for bank in corpus.registry.banks:
        documents = await corpus.stack.index.scan(SearchFilters(bank_id=bank), size=1_000)
        await index.upsert(documents)
    try:
        yield index
    finally:
        await index.close()


@pytest.mark.connected
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_opensearch_text_search_never_crosses_banks(
    corpus: Corpus, opensearch_copy: OpenSearchMemoryIndex, data: st.DataObject
) -> None:
    registry = corpus.registry
    bank = data.draw(st.sampled_from([*sorted(registry.banks), "delta", "ALPHA"]), label="bank")
    request = data.draw(recall_requests(), label="request")
    filters = SearchFilters(
        bank_id=bank,
        fact_types=frozenset(request.types) if request.types is not None else None,
        tags_any=frozenset(request.tags) if request.tags is not None else None,
        since=request.since,
        until=request.until,
    )
    own = registry.banks.get(bank, {})
    hits = await opensearch_copy.search_text(request.query, filters, size=request.k)
    registry.count("opensearch searches")
    registry.count("opensearch hits", len(hits))
    for hit in hits:
        assert hit.document.bank_id == bank
        assert hit.document.event_id in own
        assert hit.document.object_storage_key == own[hit.document.event_id].object_storage_key
    for memory_id in data.draw(
        st.lists(st.sampled_from(sorted(registry.banks["beta"])), max_size=3)
    ):
        found = await opensearch_copy.get(bank, memory_id)
        assert (found is not None) == (bank == "beta")
    assert await opensearch_copy.count(bank) == len(own)
