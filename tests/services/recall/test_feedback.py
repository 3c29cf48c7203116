"""Retrieval feedback is coalesced, written in the background, and never lost on drain."""

from __future__ import annotations

import asyncio

from cogsub.core import IndexDocument
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.recall.feedback import RetrievalFeedback


def _doc(event_id: str, bank: str = "b") -> IndexDocument:
    return IndexDocument(
        event_id=event_id,
        timestamp="2026-05-08T22:31:25.237Z",
        event_type="user_input",
        session_id=None,
        summary="x",
        embedding=[1.0, 0.0],
        importance_score=0.5,
        reward_score=0.5,
        confidence=0.5,
        object_storage_key=f"events/{event_id}.json",
        tags=[],
        bank_id=bank,
    )


async def test_increments_are_coalesced_and_written_on_drain() -> None:
    index = SqliteMemoryIndex(":memory:")
    await index.ensure(dimension=2)
    await index.upsert([_doc("a"), _doc("b"), _doc("c", bank="other")])
    feedback = RetrievalFeedback(index, flush_interval_s=60)
    writes = 0
    update_across = index.update_across

    async def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal writes
        writes += 1
        return await update_across(*args, **kwargs)

    index.update_across = counting  # type: ignore[method-assign]
    for _ in range(5):
        feedback.returned("b", ["a", "b"])
    feedback.returned("b", ["c"])  # another bank's id: skipped by the index, not fatal
    feedback.returned("other", ["c"])
    await feedback.drain()
    assert (await index.get("b", "a")).retrieval_count == 5  # type: ignore[union-attr]
    assert (await index.get("b", "b")).retrieval_count == 5  # type: ignore[union-attr]
    assert (await index.get("other", "c")).retrieval_count == 1  # type: ignore[union-attr]
    # One bulk write for both banks: not one per bank, per recall or per memory.
    assert writes == 1
    await index.close()


async def test_returned_does_not_wait_for_the_index() -> None:
    index = SqliteMemoryIndex(":memory:")
    await index.ensure(dimension=2)
    await index.upsert([_doc("a")])
    gate = asyncio.Event()
    update_across = index.update_across

    async def slow(*args, **kwargs):  # type: ignore[no-untyped-def]
        await gate.wait()
        return await update_across(*args, **kwargs)

    index.update_across = slow  # type: ignore[method-assign]
    feedback = RetrievalFeedback(index, flush_interval_s=0.01)
    feedback.returned("b", ["a"])  # returns at once although the write is stuck
    await asyncio.sleep(0.05)
    assert (await index.get("b", "a")).retrieval_count == 0  # type: ignore[union-attr]
    gate.set()
    await feedback.drain()
    assert (await index.get("b", "a")).retrieval_count == 1  # type: ignore[union-attr]
    await index.close()


def test_session_novelty_counts_the_turn_right_after_as_age_zero() -> None:
    from cogsub.recall.service import SessionNovelty

    novelty = SessionNovelty()
    assert novelty.ages("b", "s") == {}
    novelty.shown("b", "s", ["a"])
    assert novelty.ages("b", "s") == {"a": 0}
    novelty.shown("b", "s", ["c"])
    assert novelty.ages("b", "s") == {"a": 1, "c": 0}
    assert novelty.ages("b", "other") == {} and novelty.ages("x", "s") == {}
    novelty.shown("b", None, ["z"])  # no session: nothing tracked
    assert "z" not in novelty.ages("b", "s")
