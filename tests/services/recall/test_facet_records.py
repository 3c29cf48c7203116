"""An "X and Y" question through the real stack: two index trips, its session's novelty read by
each facet, and what it returned recorded once, as the question as asked."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from cogsub.core.memory import RecallRequest, RetainRequest
from cogsub.embeddings.hash import HashEmbedder
from cogsub.recall import MemoryService, RankingPolicy

from .stack import LiveStack, live_stack
from .test_one_trip import Counted

BANK = "b"
SAID = [
    "Jon: I dance every day, dance is my whole life.",
    "Jon: My dance studio teaches dance to kids.",
    "Jon: Last night I watched a dance show about dance history.",
    "Gina: I used to dance in competitions.",
    "Gina: My dance crew won a dance battle.",
    "Gina: My clothing store opened this week.",
]
QUESTION = "Did Jon and Gina both dance?"
#: Lexical only (the hash embedder's cosines would be noise); novelty weighs enough to reorder.
POLICY = RankingPolicy(semantic_weight=0.0, novelty=1.0)


async def _ids_by_text(stack: LiveStack) -> dict[str, str]:
    ids = {}
    for text in SAID:
        kept = await stack.service.retain(BANK, RetainRequest(content=text, wait=True))
        ids[text] = kept.memory_id
    return ids


async def test_two_index_trips_for_the_facets_and_one_without(data_dir: Path) -> None:
    async with live_stack(data_dir, policy=POLICY) as stack:
        await _ids_by_text(stack)
        index = Counted(stack.index)
        service = MemoryService(
            bus=stack.bus, archive=stack.archive, index=index, embedder=HashEmbedder()
        )
        await service.recall(BANK, RecallRequest(query=QUESTION, k=4, reinforce=False))
        assert index.calls == Counter(recall_candidates=2)
        index.calls.clear()
        await service.recall(BANK, RecallRequest(query="Did Jon dance?", k=4, reinforce=False))
        assert index.calls == Counter(recall_candidates=1)


async def test_novelty_is_recorded_once_for_exactly_the_returned_ids(data_dir: Path) -> None:
    async with live_stack(data_dir, policy=POLICY) as stack:
        await _ids_by_text(stack)
        service = stack.service
        novelty = service._novelty  # what the session was shown is not on the wire
        asked = RecallRequest(query=QUESTION, k=2, session_id="s", reinforce=False)
        first = [r.id for r in (await service.recall(BANK, asked)).results]
        assert len(first) == 2
        # Each facet found three or more: only the two returned count as shown, at this turn.
        assert novelty.ages(BANK, "s") == dict.fromkeys(first, 0)
        single = RecallRequest(query="Did Gina dance?", k=1, session_id="s", reinforce=False)
        later = [r.id for r in (await service.recall(BANK, single)).results]
        # One turn later, not two: the facets question was one turn of the session.
        assert novelty.ages(BANK, "s") == {**dict.fromkeys(first, 1), **dict.fromkeys(later, 0)}
        await service.recall(BANK, RecallRequest(query=QUESTION, k=2, reinforce=False))
        assert list(novelty._sessions) == [(BANK, "s")]  # no session: nothing tracked


async def test_a_facet_ranks_what_its_session_was_shown_lower(data_dir: Path) -> None:
    async with live_stack(data_dir, policy=POLICY) as stack:
        await _ids_by_text(stack)
        asked = RecallRequest(query=QUESTION, k=2, session_id="s", reinforce=False)
        first = [r.id for r in (await stack.service.recall(BANK, asked)).results]
        again = [r.id for r in (await stack.service.recall(BANK, asked)).results]
        # Each facet's best hit was just shown to "s": the next best of each takes its place.
        assert len(again) == 2 and not set(first) & set(again)
        elsewhere = asked.model_copy(update={"session_id": "other"})
        fresh = [r.id for r in (await stack.service.recall(BANK, elsewhere)).results]
        assert fresh == first


async def test_reinforcement_only_when_asked_and_only_for_the_returned(data_dir: Path) -> None:
    async with live_stack(data_dir, policy=POLICY) as stack:
        ids = await _ids_by_text(stack)
        quiet = RecallRequest(query=QUESTION, k=2, reinforce=False)
        await stack.service.recall(BANK, quiet)
        await stack.service.drain()
        assert await _counts(stack, ids.values()) == dict.fromkeys(ids.values(), 0)
        loud = RecallRequest(query=QUESTION, k=2)
        returned = {r.id for r in (await stack.service.recall(BANK, loud)).results}
        await stack.service.drain()
        counts = await _counts(stack, ids.values())
        assert len(returned) == 2
        assert counts == {i: 1 if i in returned else 0 for i in ids.values()}


async def _counts(stack: LiveStack, memory_ids: Iterable[str]) -> dict[str, int]:
    counts = {}
    for memory_id in memory_ids:
        doc = await stack.index.get(BANK, memory_id)
        assert doc is not None
        counts[memory_id] = doc.retrieval_count
    return counts
