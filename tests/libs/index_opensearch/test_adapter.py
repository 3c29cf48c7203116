"""The OpenSearch adapter against a live OpenSearch API (osmem-server unless OPENSEARCH_URL)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

import pytest

from cogsub.core.documents import IndexDocument
from cogsub.core.errors import (
    ConfigurationError,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)
from cogsub.core.events import FactType
from cogsub.index import opensearch_queries as q
from cogsub.index.opensearch import OpenSearchMemoryIndex
from cogsub.index.ports import DecayedPage, DecayStep, DocumentPatch, SearchFilters
from tests.fixtures.opensearch import OpenSearchEndpoint, osmem_process

pytestmark = pytest.mark.connected

DIM = 8


def make_doc(
    event_id: str,
    *,
    bank_id: str = "bank-a",
    summary: str = "a note about nothing in particular",
    timestamp: str = "2026-05-08T12:00:00.000Z",
    importance: float = 0.5,
    tags: list[str] | None = None,
    fact_type: FactType | None = FactType.EXPERIENCE,
    embedding: list[float] | None = None,
) -> IndexDocument:
    return IndexDocument(
        event_id=event_id,
        timestamp=timestamp,
        event_type="user_input",
        session_id="s1",
        summary=summary,
        embedding=embedding if embedding is not None else unit(sum(map(ord, event_id)) % DIM),
        importance_score=importance,
        reward_score=0.5,
        confidence=0.5,
        object_storage_key=f"events/2026/05/08/{event_id}.json",
        tags=tags or [],
        bank_id=bank_id,
        fact_type=fact_type,
    )


def unit(axis: int, dim: int = DIM) -> list[float]:
    return [1.0 if i == axis else 0.0 for i in range(dim)]


@pytest.fixture
async def new_index(
    opensearch_endpoint: OpenSearchEndpoint, opensearch_index_name: str
) -> AsyncIterator[Callable[[], OpenSearchMemoryIndex]]:
    made: list[OpenSearchMemoryIndex] = []

    def factory() -> OpenSearchMemoryIndex:
        index = opensearch_endpoint.memory_index(opensearch_index_name)
        made.append(index)
        return index

    yield factory
    for index in made:
        await index.close()


@pytest.fixture
async def index(new_index: Callable[[], OpenSearchMemoryIndex]) -> OpenSearchMemoryIndex:
    idx = new_index()
    await idx.ensure(dimension=DIM)
    return idx


async def test_template_is_accepted_as_written(
    index: OpenSearchMemoryIndex, opensearch_endpoint: OpenSearchEndpoint
) -> None:
    with opensearch_endpoint.http() as http:
        mapping = http.get(f"/{index.index_name}/_mapping").json()
        settings = http.get(f"/{index.index_name}/_settings").json()
    stored = mapping[index.index_name]["mappings"]
    wanted = q.index_template(DIM)["mappings"]
    assert stored["dynamic"] == "strict"
    for name, spec in wanted["properties"].items():
        # The server may add defaults (doc_values...), never drop or change ours.
        assert stored["properties"][name].items() >= spec.items(), name
    assert str(settings[index.index_name]["settings"]["index"]["knn"]).lower() == "true"


async def test_ensure_is_idempotent_across_instances(
    index: OpenSearchMemoryIndex, new_index: Callable[[], OpenSearchMemoryIndex]
) -> None:
    await index.upsert([make_doc("e1")])
    await index.ensure(dimension=DIM)
    other = new_index()
    await other.ensure(dimension=DIM)
    assert await other.count() == 1


async def test_an_index_mapped_before_the_detail_field_gains_it_on_first_use(
    new_index: Callable[[], OpenSearchMemoryIndex], opensearch_endpoint: OpenSearchEndpoint
) -> None:
    first = new_index()
    template = q.index_template(DIM)
    for name in q.ADDED_FIELDS:  # as the index was made before these fields were mapped
        del template["mappings"]["properties"][name]
    with opensearch_endpoint.http() as http:
        http.put(f"/{first.index_name}", json=template).raise_for_status()
    old = make_doc("old", summary="a note written before")
    with opensearch_endpoint.http() as http:
        assert "detail" not in old.to_source()  # none to store: the seed's shape
        written = http.put(
            f"/{first.index_name}/_doc/{q.document_id(old.bank_id, old.event_id)}",
            params={"refresh": "true"},
            json=old.to_source(),
        )
        written.raise_for_status()
    # A writer that never calls ensure (consolidation) extends the mapping before its write.
    long = make_doc("long", summary="deploy notes").model_copy(
        update={"detail": "then restart the kubelet"}
    )
    await first.upsert([long])
    hits = await first.search_text("kubelet", SearchFilters(bank_id="bank-a"), size=5)
    assert [hit.document.event_id for hit in hits] == ["long"]
    assert await first.get("bank-a", "old") == old  # no detail stored: none read
    with opensearch_endpoint.http() as http:
        mapping = http.get(f"/{first.index_name}/_mapping").json()
    assert mapping[first.index_name]["mappings"]["properties"]["detail"] == q.ADDED_FIELDS["detail"]
    await new_index().ensure(dimension=DIM)  # and ensure finds nothing left to add


async def test_ensure_with_another_dimension_is_a_configuration_error(
    index: OpenSearchMemoryIndex, new_index: Callable[[], OpenSearchMemoryIndex]
) -> None:
    with pytest.raises(ConfigurationError, match="dimension 8"):
        await new_index().ensure(dimension=DIM * 2)


async def test_an_index_of_event_id_documents_is_refused_until_rebuilt(
    index: OpenSearchMemoryIndex,
    new_index: Callable[[], OpenSearchMemoryIndex],
    opensearch_endpoint: OpenSearchEndpoint,
) -> None:
    await index.upsert([make_doc("new")])
    written_before = make_doc("old", timestamp="2026-01-01T00:00:00.000Z").to_source()
    with opensearch_endpoint.http() as http:  # as the adapter wrote it before ids named the bank
        put = http.put(
            f"/{index.index_name}/_doc/old", params={"refresh": "true"}, json=written_before
        )
        put.raise_for_status()
    with pytest.raises(ConfigurationError, match="replay --reembed"):
        await new_index().ensure(dimension=DIM)


async def test_upsert_before_ensure_does_not_auto_create_an_index(
    new_index: Callable[[], OpenSearchMemoryIndex], opensearch_endpoint: OpenSearchEndpoint
) -> None:
    idx = new_index()
    with pytest.raises(ConfigurationError, match="ensure"):
        await idx.upsert([make_doc("e1")])
    with opensearch_endpoint.http() as http:
        assert http.head(f"/{idx.index_name}").status_code == 404


async def test_bulk_upsert_is_idempotent_and_replaces(index: OpenSearchMemoryIndex) -> None:
    docs = [make_doc(f"e{i}", summary=f"memory number {i}") for i in range(30)]
    await index.upsert(docs)
    await index.upsert(docs)  # a redelivery
    assert await index.count("bank-a") == 30
    await index.upsert([make_doc("e3", summary="a replaced memory", importance=0.9)])
    assert await index.count("bank-a") == 30
    got = await index.get("bank-a", "e3")
    assert got is not None
    assert (got.summary, got.importance_score) == ("a replaced memory", 0.9)
    assert await index.get("bank-a", "e4") == docs[4]


async def test_upsert_spans_several_bulk_requests(
    opensearch_endpoint: OpenSearchEndpoint, opensearch_index_name: str
) -> None:
    async with opensearch_endpoint.memory_index(opensearch_index_name, bulk_size=7) as idx:
        await idx.ensure(dimension=DIM)
        await idx.upsert([make_doc(f"e{i}") for i in range(23)])
        assert await idx.count() == 23


async def test_wrong_vector_length_is_refused_before_writing(index: OpenSearchMemoryIndex) -> None:
    with pytest.raises(ConfigurationError, match="'bad' has a 2-dimensional"):
        await index.upsert([make_doc("ok"), make_doc("bad", embedding=[1.0, 0.0])])
    assert await index.count() == 0


async def test_per_item_bulk_errors_are_raised(index: OpenSearchMemoryIndex) -> None:
    good = make_doc("good")
    # Bypass validation to send what only the server can refuse: an unparseable date.
    bad = IndexDocument.model_construct(
        **{**good.model_dump(), "event_id": "bad", "timestamp": "yesterday"}
    )
    with pytest.raises(InvalidInputError) as caught:
        await index.upsert([good, bad])
    assert [p.field for p in caught.value.problems] == ["documents[1]"]
    # Items are independent in a bulk: the good one is there, so a retry is idempotent.
    assert await index.get("bank-a", "good") == good


async def test_bm25_search_with_filters(index: OpenSearchMemoryIndex) -> None:
    await index.upsert(
        [
            make_doc("cat1", summary="The cats were running across the garden", tags=["pets"]),
            make_doc(
                "cat2", summary="A cat sleeps", importance=0.9, timestamp="2026-05-10T00:00:00.000Z"
            ),
            make_doc("dog", summary="Dogs bark at the postman", tags=["pets"]),
            make_doc("world", summary="Cats are mammals", fact_type=FactType.WORLD),
            make_doc("other", summary="cat cat cat", bank_id="bank-b"),
        ]
    )
    hits = await index.search_text("running cat", SearchFilters(bank_id="bank-a"), size=10)
    ids = [h.document.event_id for h in hits]
    # English stemming: "running"/"cats" match; the doc with both terms ranks first.
    assert ids[0] == "cat1" and set(ids) == {"cat1", "cat2", "world"}
    assert all(h.score > 0 for h in hits)
    assert hits == sorted(hits, key=lambda h: h.score, reverse=True)

    async def ids_for(**kwargs: object) -> set[str]:
        filters = SearchFilters(bank_id="bank-a", **kwargs)  # type: ignore[arg-type]
        return {h.document.event_id for h in await index.search_text("cats", filters, size=10)}

    assert await ids_for(fact_types=frozenset({FactType.WORLD})) == {"world"}
    assert await ids_for(tags_any=frozenset({"pets", "nope"})) == {"cat1"}
    assert await ids_for(min_importance=0.8) == {"cat2"}
    assert await ids_for(since=datetime(2026, 5, 9, tzinfo=UTC)) == {"cat2"}
    # ``until`` is exclusive.
    assert await ids_for(until=datetime(2026, 5, 10, tzinfo=UTC)) == {"cat1", "world"}
    assert await ids_for(fact_types=frozenset()) == set()
    assert len(await index.search_text("cat", SearchFilters(bank_id="bank-a"), size=1)) == 1
    assert await index.search_text("?!", SearchFilters(bank_id="bank-a"), size=5) == []


async def test_tags_match_text_queries_exactly(index: OpenSearchMemoryIndex) -> None:
    await index.upsert(
        [
            make_doc("tagged", summary="nothing relevant here", tags=["gardening"]),
            make_doc("both", summary="gardening in spring", tags=["gardening"]),
            make_doc("text", summary="gardening tools"),
        ]
    )
    hits = await index.search_text("Gardening", SearchFilters(bank_id="bank-a"), size=10)
    ids = [h.document.event_id for h in hits]
    assert ids[0] == "both" and set(ids) == {"both", "tagged", "text"}


async def test_banks_are_isolated(index: OpenSearchMemoryIndex) -> None:
    await index.upsert([make_doc("a1", bank_id="bank-a", summary="secret plan")])
    await index.upsert([make_doc("b1", bank_id="bank-b", summary="secret plan")])
    hits = await index.search_text("secret", SearchFilters(bank_id="bank-b"), size=10)
    assert [h.document.event_id for h in hits] == ["b1"]
    assert await index.get("bank-b", "a1") is None
    assert await index.search_text("secret", SearchFilters(bank_id="bank-c"), size=10) == []
    assert (await index.count("bank-a"), await index.count("bank-b"), await index.count()) == (
        1,
        1,
        2,
    )
    with pytest.raises(NotFoundError):
        await index.update("bank-b", "a1", DocumentPatch(importance_score=1.0))
    assert await index.delete("bank-b", "a1") is False
    assert await index.get("bank-a", "a1") is not None


async def test_one_event_id_in_two_banks_decays_and_is_forgotten_apart(
    index: OpenSearchMemoryIndex, opensearch_endpoint: OpenSearchEndpoint
) -> None:
    old = "2026-05-01T00:00:00.000Z"
    mine = make_doc("shared-id", bank_id="bank-a", summary="mine", timestamp=old)
    theirs = make_doc("shared-id", bank_id="bank-b", summary="theirs", timestamp=old)
    await index.upsert([mine, theirs])
    with opensearch_endpoint.http() as http:  # each under its own _id, the bank's and the event's
        stored = http.get(f"/{index.index_name}/_doc/bank-b%7Cshared-id").json()
    assert stored["_source"]["summary"] == "theirs"

    step = DecayStep(rate=0.5, floor=0.05, before=datetime(2026, 5, 8, tzinfo=UTC))
    assert await index.decay_page("bank-b", step, size=10) == DecayedPage(1, "shared-id")
    assert await index.update_many("bank-b", {"shared-id": DocumentPatch(importance_score=0.9)})
    assert await index.get("bank-a", "shared-id") == mine
    assert await index.scan(SearchFilters(bank_id="bank-a"), size=5, after="shared-") == [mine]

    assert await index.delete("bank-b", "shared-id") is True
    assert await index.get("bank-a", "shared-id") == mine
    assert await index.present("bank-a", ["shared-id"]) == {"shared-id"}
    assert await index.present("bank-b", ["shared-id"]) == set()


async def test_a_delete_that_loses_a_race_reads_the_document_again(
    index: OpenSearchMemoryIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    await index.upsert([make_doc("busy"), make_doc("busy", bank_id="bank-b")])
    bulk = index._client.bulk
    raced: list[str] = []

    async def used_in_between(*args: object, **kwargs: object) -> object:
        if not raced:  # feedback lands after the version was read, before the delete
            raced.append("busy")
            await index.update("bank-a", "busy", DocumentPatch(retrieval_count_increment=1))
        return await bulk(*args, **kwargs)

    monkeypatch.setattr(index._client, "bulk", used_in_between)
    assert await index.delete_many("bank-a", ["busy"]) == 1
    assert raced == ["busy"]
    assert await index.get("bank-a", "busy") is None
    assert await index.get("bank-b", "busy") == make_doc("busy", bank_id="bank-b")


async def test_a_bank_id_holding_the_id_separator_is_refused_and_nothing_written(
    index: OpenSearchMemoryIndex,
) -> None:
    # "a|b" + "c" would be the _id of bank "a"'s event "b|c".
    with pytest.raises(InvalidInputError):
        await index.upsert([make_doc("fine", bank_id="a"), make_doc("c", bank_id="a|b")])
    assert await index.count() == 0


async def test_concurrent_increments_are_not_lost(
    index: OpenSearchMemoryIndex, new_index: Callable[[], OpenSearchMemoryIndex]
) -> None:
    await index.upsert([make_doc("hot")])
    # Separate clients, as separate workers would be.
    writers = [new_index() for _ in range(4)]
    patch = DocumentPatch(retrieval_count_increment=1)
    results = await asyncio.gather(
        *(writers[i % 4].update("bank-a", "hot", patch) for i in range(20))
    )
    assert sorted(r.retrieval_count for r in results) == list(range(1, 21))
    final = await index.get("bank-a", "hot")
    assert final is not None and final.retrieval_count == 20


async def test_update_changes_only_named_signals(index: OpenSearchMemoryIndex) -> None:
    original = make_doc("e1", importance=0.3)
    await index.upsert([original])
    updated = await index.update(
        "bank-a", "e1", DocumentPatch(importance_score=0.8, retrieval_count=5)
    )
    assert updated == original.model_copy(update={"importance_score": 0.8, "retrieval_count": 5})
    assert await index.get("bank-a", "e1") == updated
    hits = await index.search_text(
        "note", SearchFilters(bank_id="bank-a", min_importance=0.7), size=5
    )
    assert [h.document.event_id for h in hits] == ["e1"]  # searchable on return
    with pytest.raises(InvalidInputError):
        await index.update("bank-a", "e1", DocumentPatch(decay_factor=1.5))
    with pytest.raises(NotFoundError):
        await index.update("bank-a", "missing", DocumentPatch(retrieval_count_increment=1))


async def test_a_decay_page_that_loses_a_race_decays_the_new_value_once(
    index: OpenSearchMemoryIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = "2026-05-01T00:00:00.000Z"
    await index.upsert([make_doc("used", timestamp=old), make_doc("idle", timestamp=old)])
    await index.update("bank-a", "used", DocumentPatch(decay_factor=0.4))
    bulk = index._client.bulk
    raced: list[str] = []

    async def used_in_between(*args: object, **kwargs: object) -> object:
        if not raced:  # feedback lands after the page was read, before it is written
            raced.append("used")
            await index.update("bank-a", "used", DocumentPatch(decay_factor=1.0))
        return await bulk(*args, **kwargs)

    monkeypatch.setattr(index._client, "bulk", used_in_between)
    step = DecayStep(rate=0.5, floor=0.05, before=datetime(2026, 5, 8, tzinfo=UTC))
    page = await index.decay_page("bank-a", step, size=10)
    assert page == DecayedPage(2, "used")
    used, idle = await index.get("bank-a", "used"), await index.get("bank-a", "idle")
    assert used is not None and used.decay_factor == 0.5  # from 1.0, not from the 0.4 read
    assert idle is not None and idle.decay_factor == 0.5


async def test_a_memory_forgotten_while_its_page_is_decayed_is_skipped(
    index: OpenSearchMemoryIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = "2026-05-01T00:00:00.000Z"
    await index.upsert([make_doc("gone", timestamp=old), make_doc("kept", timestamp=old)])
    bulk = index._client.bulk
    forgotten: list[str] = []

    async def forgotten_in_between(*args: object, **kwargs: object) -> object:
        if not forgotten:  # forget lands after the page was read, before it is written
            forgotten.append("gone")
            await index.delete("bank-a", "gone")  # its own bulk passes through
        return await bulk(*args, **kwargs)

    monkeypatch.setattr(index._client, "bulk", forgotten_in_between)
    step = DecayStep(rate=0.5, floor=0.05, before=datetime(2026, 5, 8, tzinfo=UTC))
    assert await index.decay_page("bank-a", step, size=10) == DecayedPage(1, "kept")
    kept = await index.get("bank-a", "kept")
    assert kept is not None and kept.decay_factor == 0.5
    assert await index.get("bank-a", "gone") is None


async def test_delete_and_count(index: OpenSearchMemoryIndex) -> None:
    await index.upsert([make_doc("e1"), make_doc("e2")])
    assert await index.delete("bank-a", "e1") is True
    assert await index.delete("bank-a", "e1") is False
    assert await index.get("bank-a", "e1") is None
    assert await index.count("bank-a") == 1


async def test_vector_search(
    index: OpenSearchMemoryIndex, opensearch_endpoint: OpenSearchEndpoint
) -> None:
    await index.upsert(
        [make_doc(f"v{i}", embedding=unit(i)) for i in range(DIM)]
        + [make_doc("other", bank_id="bank-b", embedding=unit(0))]
    )
    query = [0.9, 0.1, 0, 0, 0, 0, 0, 0]
    norm = math.sqrt(sum(x * x for x in query))
    query = [x / norm for x in query]
    with pytest.raises(InvalidInputError):
        await index.search_vector([1.0, 0.0], SearchFilters(bank_id="bank-a"), size=3)
    if not opensearch_endpoint.supports_knn:
        # osmem has no k-NN: the adapter says so in our terms, and the search itself is a skip.
        with pytest.raises(ConfigurationError):
            await index.search_vector(query, SearchFilters(bank_id="bank-a"), size=3)
        pytest.skip("this server lists no k-NN plugin: only the ConfigurationError was checked")
    hits = await index.search_vector(query, SearchFilters(bank_id="bank-a"), size=3)
    assert [h.document.event_id for h in hits][:2] == ["v0", "v1"]
    assert all(h.document.bank_id == "bank-a" for h in hits)


async def test_unavailable_when_the_server_is_down() -> None:
    with osmem_process() as server:
        idx = OpenSearchMemoryIndex(url=server.url, index="down", timeout=2, max_retries=0)
        try:
            await idx.ensure(dimension=DIM)
            await idx.upsert([make_doc("e1")])
            server.stop()
            with pytest.raises(UnavailableError) as caught:
                await idx.upsert([make_doc("e2")])
            assert caught.value.retryable
            with pytest.raises(UnavailableError):
                await idx.search_text("note", SearchFilters(bank_id="bank-a"), size=1)
            with pytest.raises(UnavailableError):
                await idx.get("bank-a", "e1")
        finally:
            await idx.close()


async def test_unavailable_when_nothing_listens() -> None:
    async with OpenSearchMemoryIndex(url="http://127.0.0.1:9", timeout=1, max_retries=0) as idx:
        with pytest.raises(UnavailableError):
            await idx.ensure(dimension=DIM)


def test_credentials_never_appear_in_repr() -> None:
    idx = OpenSearchMemoryIndex(url="http://127.0.0.1:9", username="admin", password="s3cr3t-pw")
    assert "s3cr3t" not in repr(idx) and "admin" not in repr(idx)
    asyncio.run(idx.close())


@pytest.mark.slow
async def test_bulk_indexing_rate(
    opensearch_endpoint: OpenSearchEndpoint, opensearch_index_name: str
) -> None:
    docs = [make_doc(f"r{i}", summary=f"memory {i} about topic {i % 97}") for i in range(10_000)]
    async with opensearch_endpoint.memory_index(opensearch_index_name, bulk_size=500) as idx:
        await idx.ensure(dimension=DIM)
        started = time.perf_counter()
        await idx.upsert(docs)
        elapsed = time.perf_counter() - started
        assert await idx.count() == 10_000
    print(f"\nbulk indexing: {len(docs) / elapsed:,.0f} docs/s ({elapsed:.2f} s for 10,000)")


async def test_promote_switches_an_alias_to_a_new_index_version_atomically(
    opensearch_endpoint: OpenSearchEndpoint, opensearch_index_name: str
) -> None:
    live = opensearch_endpoint.memory_index(opensearch_index_name)
    v2 = opensearch_endpoint.memory_index(f"{opensearch_index_name}-v2")
    v3 = opensearch_endpoint.memory_index(f"{opensearch_index_name}-v3")
    try:
        await live.ensure(dimension=DIM)
        await live.upsert([make_doc("old-1")])
        await v2.ensure(dimension=2 * DIM)
        await v2.upsert([make_doc("new-1", embedding=unit(3, 2 * DIM))])
        # The first deployment's concrete index gives way to the alias in the same update.
        assert await v2.promote(opensearch_index_name) == [opensearch_index_name]
        through_alias = opensearch_endpoint.memory_index(opensearch_index_name)
        try:
            await through_alias.ensure(dimension=2 * DIM)  # the alias answers with v2's mapping
            assert await through_alias.get("bank-a", "new-1") is not None
            assert await through_alias.get("bank-a", "old-1") is None
            await through_alias.upsert([make_doc("new-2", embedding=unit(1, 2 * DIM))])
            assert await v2.count("bank-a") == 2  # writes through the alias land in v2
            await v3.ensure(dimension=DIM)
            assert await v3.promote(opensearch_index_name) == [f"{opensearch_index_name}-v2"]
            await through_alias.ensure(dimension=DIM)
            assert await through_alias.count("bank-a") == 0
            assert await v2.count("bank-a") == 2  # the previous version stays for a rollback
        finally:
            await through_alias.close()
    finally:
        for index in (live, v2, v3):
            await index.close()
