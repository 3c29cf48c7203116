"""Recall over a retained conversation: context, speaker and time cues, reinforcement switch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from cogsub.core.memory import RecallRequest, RetainContext, RetainRequest
from cogsub.recall import RankingPolicy
from tests.services.recall.stack import LiveStack, live_stack

BANK = "conversation"
START = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
TURNS = [
    ("Alice", "Hi Bob! How was the weekend?"),
    ("Bob", "Great, thanks. I finally repaired the old sailboat."),
    ("Alice", "Which instrument are you learning these days?"),
    ("Bob", "The cello, with a teacher from the conservatory."),
    ("Alice", "That sounds lovely."),
    ("Bob", "I went hiking yesterday with my sister."),
    ("Alice", "Bob, the hiking trail near the lake is beautiful."),
]


async def _retain_conversation(stack: LiveStack) -> list[str]:
    ids = []
    for position, (speaker, text) in enumerate(TURNS):
        result = await stack.service.retain(
            BANK,
            RetainRequest(
                content=f"{speaker}: {text}",
                timestamp=START + timedelta(seconds=position),
                context=RetainContext(session_id="session-1", user_id=speaker),
                memory_id=f"turn-{position}",
                wait=True,
            ),
        )
        assert result.recallable
        ids.append(result.memory_id)
    return ids


async def test_an_answer_is_found_through_the_question_before_it(tmp_path: Path) -> None:
    async with live_stack(tmp_path) as stack:
        await _retain_conversation(stack)
        request = RecallRequest(query="What instrument is Bob learning?", k=3, reinforce=False)
        response = await stack.service.recall(BANK, request)
        ids = [hit.id for hit in response.results]
        assert "turn-3" in ids  # "The cello..." shares no word with the query but "Bob"
        answer = next(hit for hit in response.results if hit.id == "turn-3")
        assert answer.explain.context is not None and answer.explain.context > 0.5
        assert answer.text == "Bob: The cello, with a teacher from the conservatory."
        for memory_id in ids:  # reinforce=False: nothing counted
            stored = await stack.service.get_memory(BANK, memory_id)
            assert stored.retrieval_count == 0


async def test_turns_neither_search_found_come_in_around_the_hits(tmp_path: Path) -> None:
    # Pools of one: the searches return "Which instrument..." (BM25) and one
    # vector hit; the reply after the question is fetched as its neighbour.
    policy = RankingPolicy(semantic_weight=0.0)
    query = "Which instrument is Alice asking about?"
    async with live_stack(tmp_path, policy=policy, text_pool=1, vector_pool=1) as stack:
        await _retain_conversation(stack)
        response = await stack.service.recall(BANK, RecallRequest(query=query, k=3))
        assert [hit.id for hit in response.results][:2] == ["turn-2", "turn-3"]
        assert response.candidates > 2
    closed = RankingPolicy(semantic_weight=0.0, expand_top=0)
    async with live_stack(tmp_path / "closed", policy=closed, text_pool=1, vector_pool=1) as stack:
        await _retain_conversation(stack)
        response = await stack.service.recall(BANK, RecallRequest(query=query, k=3))
        assert "turn-3" not in [hit.id for hit in response.results]


async def test_the_named_speaker_and_the_time_cue_come_first(tmp_path: Path) -> None:
    async with live_stack(tmp_path, policy=RankingPolicy(semantic_weight=0.0)) as stack:
        await _retain_conversation(stack)
        response = await stack.service.recall(
            BANK, RecallRequest(query="When did Bob go hiking?", k=2)
        )
        # Bob said when; Alice only mentioned Bob and hiking.
        assert response.results[0].id == "turn-5"
        assert response.results[0].explain.boost is not None
        assert response.results[0].explain.boost > 1.0
        await stack.service.drain()
        stored = await stack.service.get_memory(BANK, "turn-5")
        assert stored.retrieval_count == 1  # reinforcement on by default


async def test_reciprocal_rank_fusion_stays_available(tmp_path: Path) -> None:
    async with live_stack(tmp_path, policy=RankingPolicy(fusion="rrf")) as stack:
        await _retain_conversation(stack)
        response = await stack.service.recall(
            BANK, RecallRequest(query="hiking trail lake", k=1, reinforce=False)
        )
        assert response.results[0].id == "turn-6"
        assert response.results[0].explain.lexical is None  # no contextual parts under RRF
