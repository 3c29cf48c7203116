"""Recall's hot path: one index trip, no archive read once warm, cached query vectors, no
waiting behind the index's writer."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cogsub.core.memory import RecallRequest, RetainRequest
from cogsub.embeddings.cached import CachedEmbedder
from cogsub.embeddings.hash import HashEmbedder
from cogsub.recall import MemoryService
from cogsub.recall.archived import ArchivedReads
from tests.services.recall.stack import LiveStack, live_stack

BANK = "trip"
TURNS = (
    "Melanie: I ran a charity race for mental health last Saturday.",
    "Caroline: That's great! How did it go?",
    "Melanie: It went well, we raised money for the local clinic.",
    "Caroline: I went to an LGBTQ support group yesterday.",
    "Melanie: Painting with the kids helps me unwind after work.",
)


class CountingEmbedder:
    """A real embedder that counts the texts it is asked to embed."""

    def __init__(self, name: str = "hash") -> None:
        self._inner = HashEmbedder()
        self._name = name
        self.embedded: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded += texts
        return await self._inner.embed(texts)

    async def close(self) -> None:
        await self._inner.close()


class SlowCountingEmbedder(CountingEmbedder):
    """Takes a moment per call, as a model on its thread does: concurrent askers overlap."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.sleep(0.01)
        return await super().embed(texts)


class Counted:
    """Passes every call to a real port and counts the async methods called."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if not asyncio.iscoroutinefunction(found):
            return found

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return await found(*args, **kwargs)

        return counted


# --- the query-vector cache -------------------------------------------------------------------


async def test_cached_embedder_embeds_each_text_once_and_counts() -> None:
    model = CountingEmbedder()
    cached = CachedEmbedder(model, max_entries=8)
    first = await cached.embed(["a kiwi", "a melon", "a kiwi"])
    again = await cached.embed(["a melon", "a kiwi"])
    assert model.embedded == ["a kiwi", "a melon"]  # one model call, no repeats
    assert again == [first[1], first[0]]
    assert first[0] == (await HashEmbedder().embed(["a kiwi"]))[0]
    assert cached.counts.hits == 3 and cached.counts.misses == 2 and cached.counts.entries == 2
    again[0][0] = 99.0  # a caller's change stays its own
    assert (await cached.embed(["a melon"]))[0] == first[1]


async def test_cached_embedder_forgets_the_least_recently_used_first() -> None:
    model = CountingEmbedder()
    cached = CachedEmbedder(model, max_entries=2)
    await cached.embed(["one", "two"])
    await cached.embed(["one"])  # "two" is now the least recently used
    await cached.embed(["three"])
    await cached.embed(["one", "two"])
    assert model.embedded == ["one", "two", "three", "two"]
    assert cached.counts.entries == 2
    # More new texts in one call than the cache holds still all come back.
    assert len(await cached.embed([f"t{i}" for i in range(5)])) == 5


async def test_cached_embedder_keys_by_model() -> None:
    shared_text = "the same words"
    first, second = CountingEmbedder("model-a"), CountingEmbedder("model-b")
    cached_a, cached_b = CachedEmbedder(first), CachedEmbedder(second)
    await cached_a.embed([shared_text])
    await cached_b.embed([shared_text])
    assert first.embedded == second.embedded == [shared_text]
    with pytest.raises(ValueError, match="max_entries"):
        CachedEmbedder(first, max_entries=0)


# --- archived reads ---------------------------------------------------------------------------


async def test_archived_reads_read_each_object_once_until_forgotten(tmp_path: Path) -> None:
    async with live_stack(tmp_path) as stack:
        kept = await stack.service.retain(BANK, RetainRequest(content=TURNS[0], wait=True))
        reads = ArchivedReads(stack.archive, max_entries=4)
        key, missing = kept.object_storage_key, f"{kept.object_storage_key}.nothing"
        first = await reads.events([key, missing, key])
        assert first[0] is not None and first[0].text == TURNS[0]
        assert first[1] is None and first[2] == first[0]
        await stack.archive.delete(key)
        # Write-once objects: the cache answers without the archive ...
        assert (await reads.events([key]))[0] == first[0]
        assert reads.counts.hits == 2
        reads.forgotten([key])  # ... until a forget says the object is gone
        assert await reads.events([key]) == [None]
        assert await reads.rule(missing) is None


class _HeldReads:
    """The archive, with ``get_many`` held at a gate until the test opens it."""

    def __init__(self, archive: Any) -> None:
        self._archive = archive
        self.reading, self.gate = asyncio.Event(), asyncio.Event()

    async def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        found = await self._archive.get_many(keys)
        self.reading.set()
        await self.gate.wait()
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._archive, name)


async def test_a_forget_during_a_read_is_not_undone_by_that_read(tmp_path: Path) -> None:
    async with live_stack(tmp_path) as stack:
        kept = await stack.service.retain(BANK, RetainRequest(content=TURNS[0], wait=True))
        held = _HeldReads(stack.archive)
        reads = ArchivedReads(held)  # type: ignore[arg-type]
        key = kept.object_storage_key
        in_flight = asyncio.create_task(reads.events([key]))
        await held.reading.wait()  # the body is read; the forget lands before it is kept
        await stack.archive.delete(key)
        reads.forgotten([key])
        held.gate.set()
        assert (await in_flight)[0] is not None  # that recall began before the forget
        assert await reads.events([key]) == [None]  # but the erased text was not kept


async def test_archived_reads_keep_nothing_past_its_age(tmp_path: Path) -> None:
    now = [100.0]
    async with live_stack(tmp_path) as stack:
        kept = await stack.service.retain(BANK, RetainRequest(content=TURNS[1], wait=True))
        reads = ArchivedReads(stack.archive, max_age_s=60.0, clock=lambda: now[0])
        key = kept.object_storage_key
        assert (await reads.events([key]))[0] is not None
        await stack.archive.delete(key)  # forgotten in another process: nobody tells us
        now[0] += 59.0
        assert (await reads.events([key]))[0] is not None
        now[0] += 1.0
        assert await reads.events([key]) == [None]


# --- recall's trip ----------------------------------------------------------------------------


async def retained(stack: LiveStack) -> None:
    for text in TURNS:
        await stack.service.retain(BANK, RetainRequest(content=text, wait=True))


async def test_a_recall_makes_one_index_trip_and_reads_no_archive_once_warm(
    tmp_path: Path,
) -> None:
    async with live_stack(tmp_path) as stack:
        await retained(stack)
        index, archive, embedder = (
            Counted(stack.index),
            Counted(stack.archive),
            Counted(HashEmbedder()),
        )
        service = MemoryService(bus=stack.bus, archive=archive, index=index, embedder=embedder)
        # No retrieval counts: their background write is feedback, not the recall's trip.
        request = RecallRequest(query="When did Melanie run a charity race?", k=3, reinforce=False)
        first = await service.recall(BANK, request)
        assert first.results and "charity race" in first.results[0].text
        assert index.calls == Counter(recall_candidates=1)
        assert archive.calls == Counter(get_many=1)  # the results' events, read together
        index.calls.clear()
        archive.calls.clear()
        again = await service.recall(BANK, request)
        assert [r.id for r in again.results] == [r.id for r in first.results]
        assert index.calls == Counter(recall_candidates=1)
        assert archive.calls == Counter()  # every text came from the bounded cache
        assert embedder.calls == Counter(embed=1)  # the question's vector too


async def test_recall_does_not_queue_behind_the_index_writer(tmp_path: Path) -> None:
    async with live_stack(tmp_path) as stack:
        await retained(stack)
        release, started = threading.Event(), threading.Event()

        def busy_writer(conn: sqlite3.Connection) -> None:
            started.set()
            release.wait(timeout=30)

        # A long write (a forget's rewrite, a big batch) holds the writer thread.
        writing = asyncio.ensure_future(stack.index._db.write(busy_writer))
        try:
            await asyncio.to_thread(started.wait, 10)
            request = RecallRequest(query="What helps Melanie unwind?", k=2)
            found = await asyncio.wait_for(stack.service.recall(BANK, request), timeout=5)
            assert "Painting" in found.results[0].text
            assert not writing.done()
        finally:
            release.set()
            await writing


async def test_a_question_about_two_people_asks_the_model_once_per_distinct_text(
    tmp_path: Path,
) -> None:
    async with live_stack(tmp_path) as stack:
        await retained(stack)
        model = SlowCountingEmbedder()
        service = MemoryService(
            bus=stack.bus, archive=stack.archive, index=stack.index, embedder=model
        )
        request = RecallRequest(query="Did Melanie and Caroline both paint?", k=3, reinforce=False)
        response = await service.recall(BANK, request)
        assert response.results
        # Its two facets, names left out of the vector query ("Did Melanie both paint?",
        # "Did Caroline both paint?"), share one text, embedded once.
        assert model.embedded == ["Did both paint?"]
