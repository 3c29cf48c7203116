"""Recall by facets: one recall per person of "X and Y", interleaved, recorded once (recall
stubbed by a rule)."""

from __future__ import annotations

from collections.abc import Sequence

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


class Recorded:
    """What ``recall_by_facets`` records: one (query, session, reinforce, ids) per call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, bool, list[str]]] = []

    def __call__(self, bank_id: str, request: RecallRequest, results: Sequence[MemoryHit]) -> None:
        assert bank_id == "b"
        ids = [h.id for h in results]
        self.calls.append((request.query, request.session_id, request.reinforce, ids))


async def test_a_question_about_two_people_is_asked_for_each_of_them_only() -> None:
    asked: list[tuple[str, str | None]] = []

    async def recall(bank_id: str, request: RecallRequest) -> RecallResponse:
        # A rule standing in for recall: each person's own turns, the whole question's mixture.
        asked.append((request.query, request.session_id))
        found = {"Jon": ["jon-1", "jon-2", "jon-3"], "Gina": ["gina-1", "gina-2"]}
        named = [n for n in found if n in request.query]
        ids = found[named[0]] if len(named) == 1 else ["mixed-1", "mixed-2"]
        hits = [_hit(i) for i in ids]
        return RecallResponse(
            bank_id=bank_id, query=request.query, results=hits, candidates=3, tokens=0
        )

    recorded = Recorded()
    question = RecallRequest(query="Did Jon and Gina dance?", k=4, session_id="s")
    response = await recall_by_facets(recall, "b", question, record=recorded)
    # Two recalls, each with the session (its novelty ranks them); the question as asked is not.
    assert asked == [("Did Jon dance?", "s"), ("Did Gina dance?", "s")]
    assert [h.id for h in response.results] == ["jon-1", "gina-1", "jon-2", "gina-2"]
    assert response.candidates == 6 and response.query == "Did Jon and Gina dance?"
    # Recorded once, as asked, for exactly what was returned (not jon-3).
    assert recorded.calls == [
        ("Did Jon and Gina dance?", "s", True, ["jon-1", "gina-1", "jon-2", "gina-2"])
    ]
    asked.clear()
    recorded.calls.clear()
    single = RecallRequest(query="Did Jon dance?", k=2, reinforce=False)
    alone = await recall_by_facets(recall, "b", single, record=recorded)
    assert asked == [("Did Jon dance?", None)] and [h.id for h in alone.results] == [
        "jon-1",
        "jon-2",
        "jon-3",
    ]
    assert alone.candidates == 3
    assert recorded.calls == [("Did Jon dance?", None, False, ["jon-1", "jon-2", "jon-3"])]


async def test_a_when_question_about_two_people_is_asked_once() -> None:
    asked: list[str] = []

    async def recall(bank_id: str, request: RecallRequest) -> RecallResponse:
        asked.append(request.query)
        return RecallResponse(
            bank_id=bank_id, query=request.query, results=[], candidates=0, tokens=0
        )

    recorded = Recorded()
    when = RecallRequest(query="When did Jon and Gina meet?")
    await recall_by_facets(recall, "b", when, record=recorded)
    assert asked == ["When did Jon and Gina meet?"]
    assert recorded.calls == [("When did Jon and Gina meet?", None, True, [])]
