"""Policy-weighted scoring over fused candidates: sums, ties, lazy breakdowns."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogsub.core import FactType
from cogsub.recall.fusion import Candidate
from cogsub.recall.policy import RankingPolicy
from cogsub.recall.ranking import (
    Scored,
    diversified,
    newest_versions,
    rank,
    score,
    session_lifted,
)
from tests.services.recall.docs import T0, doc

NOW = datetime(2023, 6, 7, 13, 56, tzinfo=UTC)  # 30 days after T0: recency 0.5


def test_final_is_the_weighted_sum_and_the_breakdown_says_so() -> None:
    candidate = Candidate(doc("a", importance=0.8, retrieval_count=3), fused=0.9)
    candidate.lexical, candidate.semantic, candidate.context, candidate.boost = 0.7, 0.4, 0.2, 1.3
    scored = score(candidate, RankingPolicy(), now=NOW, novelty_age=None, prefer_observations=False)
    policy = RankingPolicy()
    expected = (
        policy.relevance * 0.9
        + policy.importance * 0.8
        + policy.recency * 0.5
        + policy.reward * 0.5
        + policy.novelty * 1.0
        + policy.reinforcement * 2.0
    )
    assert scored.final == pytest.approx(expected)
    explain = scored.breakdown
    total = sum(explain.weights[name] * getattr(explain, name) for name in explain.weights)
    assert explain.final == pytest.approx(total) == pytest.approx(scored.final)
    assert (explain.lexical, explain.semantic, explain.context, explain.boost) == (
        0.7,
        0.4,
        0.2,
        1.3,
    )
    assert explain.recency == pytest.approx(0.5)
    assert scored.breakdown is explain  # built once, on demand


def test_rank_orders_by_final_then_relevance_then_id() -> None:
    same = {"importance": 0.5}
    candidates = [
        Candidate(doc("b", **same), fused=0.5),  # type: ignore[arg-type]
        Candidate(doc("a", **same), fused=0.5),  # type: ignore[arg-type]
        Candidate(doc("c", **same), fused=0.9),  # type: ignore[arg-type]
    ]
    ranked = rank(candidates, RankingPolicy(), now=NOW)
    assert [s.candidate.document.event_id for s in ranked] == ["c", "a", "b"]


def test_relevance_dominates_the_default_policy_signals() -> None:
    # The best fused candidate wins against every other signal at its strongest.
    strong = Candidate(doc("weak-signals", importance=0.0, when=T0), fused=1.0)
    rich = Candidate(doc("strong-signals", importance=1.0, when=NOW), fused=0.7)
    ranked = rank([rich, strong], RankingPolicy(), now=NOW)
    assert ranked[0].candidate.document.event_id == "weak-signals"


def test_observations_get_the_type_boost_only_when_asked() -> None:
    observed = doc("o").model_copy(update={"fact_type": FactType.OBSERVATION})
    candidates = [Candidate(doc("w"), fused=0.6), Candidate(observed, fused=0.55)]
    plain = rank(candidates, RankingPolicy(), now=NOW)
    preferred = rank(candidates, RankingPolicy(), now=NOW, prefer_observations=True)
    assert plain[0].candidate.document.event_id == "w"
    assert preferred[0].candidate.document.event_id == "o"
    assert preferred[0].breakdown.type_boost == 1.0


def test_novelty_ages_lower_memories_already_shown() -> None:
    candidates = [Candidate(doc("seen"), fused=0.8), Candidate(doc("new"), fused=0.78)]
    ranked = rank(candidates, RankingPolicy(), now=NOW, novelty_ages={"seen": 0})
    assert ranked[0].candidate.document.event_id == "new"
    assert ranked[1].breakdown.novelty == 0.0


def _ids(ranked: list[Scored]) -> list[str]:
    return [s.candidate.document.event_id for s in ranked]


def test_a_hit_lifts_the_other_candidates_of_its_session() -> None:
    hit = Candidate(doc("hit", session="s1"), fused=1.0)
    beside = Candidate(doc("beside", session="s1"), fused=0.5)
    stranger = Candidate(doc("stranger", session="s2"), fused=0.55)
    alone = Candidate(doc("alone"), fused=0.55)  # no session: lifted by nothing
    lifted = session_lifted([hit, beside, stranger, alone], 0.4)
    by_id = {c.document.event_id: c.fused for c in lifted}
    # hit: 1 + .4 × .5 = 1.2 (the best, rescaled to 1); beside: .5 + .4 × 1 = .9.
    assert by_id["hit"] == 1.0
    assert by_id["beside"] == pytest.approx(0.9 / 1.2)
    assert by_id["stranger"] == by_id["alone"] == pytest.approx(0.55 / 1.2)
    assert by_id["beside"] > by_id["stranger"]


def test_rank_applies_the_session_lift_only_when_the_policy_asks() -> None:
    def pool() -> list[Candidate]:
        return [
            Candidate(doc("hit", session="s1"), fused=1.0),
            Candidate(doc("beside", session="s1"), fused=0.5),
            Candidate(doc("stranger", session="s2"), fused=0.55),
        ]

    assert _ids(rank(pool(), RankingPolicy(), now=NOW)) == ["hit", "stranger", "beside"]
    lifted = rank(pool(), RankingPolicy(session_lift=0.4), now=NOW)
    assert _ids(lifted) == ["hit", "beside", "stranger"]


def test_diversity_gives_each_session_a_slot_in_the_head_and_keeps_scores() -> None:
    pool = [
        Candidate(doc("a1", session="a"), fused=1.0),
        Candidate(doc("a2", session="a"), fused=0.95),
        Candidate(doc("a3", session="a"), fused=0.9),
        Candidate(doc("b1", session="b"), fused=0.8),
        Candidate(doc("n1"), fused=0.85),  # no session: never held back
    ]
    ranked = rank(pool, RankingPolicy(), now=NOW)
    assert _ids(ranked) == ["a1", "a2", "a3", "n1", "b1"]
    mixed = diversified(ranked, 0.3, depth=4)
    assert _ids(mixed) == ["a1", "n1", "a2", "a3", "b1"]  # b1 is below the depth: untouched
    assert _ids(diversified(ranked, 0.3, depth=5)) == ["a1", "n1", "b1", "a2", "a3"]
    assert {s.final for s in mixed} == {s.final for s in ranked}
    policy = RankingPolicy(session_diversity=0.3, diversify_depth=5)
    assert _ids(rank(pool, policy, now=NOW)) == ["a1", "n1", "b1", "a2", "a3"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0.0, 1.0),  # fused relevance
            st.floats(0.0, 1.0),  # importance
            st.integers(0, 500),  # retrieval count
            st.floats(-400 * 86_400.0, 10 * 86_400.0),  # seconds from T0 (some in the future)
            st.sampled_from([FactType.WORLD, FactType.OBSERVATION, None]),
            st.one_of(st.none(), st.integers(0, 5)),  # novelty age
        ),
        max_size=40,
    ),
    st.booleans(),
)
def test_rank_scores_every_candidate_exactly_as_score_does(
    rows: list[tuple[float, float, int, float, FactType | None, int | None]], prefer: bool
) -> None:
    candidates, ages = [], {}
    for n, (fused, importance, count, at, fact_type, age) in enumerate(rows):
        document = doc(f"m{n}", importance=importance, retrieval_count=count, at=at)
        document.fact_type = fact_type
        candidates.append(Candidate(document, fused=fused))
        if age is not None:
            ages[document.event_id] = age
    policy = RankingPolicy(type_boost=0.3)
    ranked = rank(candidates, policy, now=NOW, novelty_ages=ages, prefer_observations=prefer)
    one_by_one = {
        c.document.event_id: score(
            c,
            policy,
            now=NOW,
            novelty_age=ages.get(c.document.event_id),
            prefer_observations=prefer,
        )
        for c in candidates
    }
    assert len(ranked) == len(candidates)
    for item in ranked:
        alone = one_by_one[item.candidate.document.event_id]
        assert item.final == alone.final  # to the bit, not approximately
        assert dict(item.signals) == dict(alone.signals)
        assert list(item.signals) == list(alone.signals)  # the breakdown's order too


def _versioned(event_id: str, procedure: str, version: int) -> Scored:
    tags = [f"procedure:{procedure}", f"version:{version}"]
    document = doc(event_id).model_copy(update={"tags": tags})
    return Scored(Candidate(document), {}, {}, 1.0)


def test_older_procedure_versions_are_dropped_and_without_newest_every_one_is_kept() -> None:
    ranked = [_versioned("a1", "p", 1), _versioned("a2", "p", 2), _versioned("b1", "q", 1)]
    kept = newest_versions(ranked, {"p": 2})
    assert [s.candidate.document.event_id for s in kept] == ["a2", "b1"]
    assert newest_versions(ranked, {}) == ranked
    assert newest_versions(ranked, {}) is not ranked
