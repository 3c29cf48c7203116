"""Policy-weighted scoring over fused candidates: sums, ties, lazy breakdowns."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cogsub.core import FactType
from cogsub.recall.fusion import Candidate
from cogsub.recall.policy import RankingPolicy
from cogsub.recall.ranking import rank, score
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
