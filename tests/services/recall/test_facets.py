"""Recall by facets: one recall per person of "X and Y", interleaved (recall stubbed by a rule)."""

from __future__ import annotations

from cogsub.core.memory import MemoryHit, RecallRequest, RecallResponse, ScoreBreakdown
from cogsub.recall.facets import interleaved, recall_by_facets

SIGNALS = ("relevance", "importance", "recency", "reward", "novelty", "reinforcement", "type_boost")


def _hit(memory_id: str, tokens: int = 10) -> MemoryHit:
    return MemoryHit(
        id=memory_id,
        text=memory_id,
        fact_type=None,
        event_type="user_input",
        timestamp="2023-05-08T13:56:00Z",
        tags=[],
        source_event_id=memory_id,
        object_storage_key=f"events/{memory_id}.json",
        score=1.0,
        tokens=tokens,
        explain=ScoreBreakdown(**dict.fromkeys(SIGNALS, 0.0), weights={}, final=1.0),
    )


def test_each_ranking_gets_a_slot_in_turn_and_each_memory_appears_once() -> None:
    rankings = [[_hit("a1"), _hit("a2"), _hit("a3")], [_hit("a1"), _hit("b2")], [_hit("c1")]]
    results, used = interleaved(rankings, 4, None)
    assert [h.id for h in results] == ["a1", "c1", "a2", "b2"]
    assert used == 40
    budgeted, used = interleaved(rankings, 10, 25)
    assert [h.id for h in budgeted] == ["a1", "c1"] and used == 20


async def test_a_question_about_two_people_is_asked_for_each_of_them() -> None:
    asked: list[str] = []
    quiet: list[bool] = []

    async def recall(bank_id: str, request: RecallRequest) -> RecallResponse:
        # A rule standing in for recall: each person's own turns, the whole question's mixture.
        asked.append(request.query)
        quiet.append(not request.reinforce and request.session_id is None)
        found = {"Jon": ["jon-1", "jon-2"], "Gina": ["gina-1", "gina-2"]}
        named = [n for n in found if n in request.query]
        ids = found[named[0]] if len(named) == 1 else ["jon-1", "jon-2", "jon-3"]
        hits = [_hit(i) for i in ids]
        return RecallResponse(
            bank_id=bank_id, query=request.query, results=hits, candidates=3, tokens=0
        )

    response = await recall_by_facets(
        recall, "b", RecallRequest(query="Did Jon and Gina dance?", k=4)
    )
    assert asked == ["Did Jon and Gina dance?", "Did Jon dance?", "Did Gina dance?"]
    assert [h.id for h in response.results] == ["jon-1", "gina-1", "jon-2", "gina-2"]
    assert response.candidates == 9 and response.query == "Did Jon and Gina dance?"
    asked.clear()
    single = await recall_by_facets(recall, "b", RecallRequest(query="Did Jon dance?", k=4))
    assert asked == ["Did Jon dance?"] and [h.id for h in single.results] == ["jon-1", "jon-2"]


async def test_a_when_question_about_two_people_is_asked_once() -> None:
    asked: list[str] = []

    async def recall(bank_id: str, request: RecallRequest) -> RecallResponse:
        asked.append(request.query)
        return RecallResponse(
            bank_id=bank_id, query=request.query, results=[], candidates=0, tokens=0
        )

    await recall_by_facets(recall, "b", RecallRequest(query="When did Jon and Gina meet?"))
    assert asked == ["When did Jon and Gina meet?"]
