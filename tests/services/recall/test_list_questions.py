"""List questions ("Which cities has Jon visited?"): read from the text, and their head spread.

A list question's evidence is one turn per item, so its head must not fill with
turns about the best item alone: ``RankingPolicy.list_diversity`` spreads it across
sessions and ``list_duplicate_cosine`` moves near-duplicates down, for those questions only.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cogsub.recall.fusion import Candidate, Pool, contextual_pool
from cogsub.recall.policy import RankingPolicy
from cogsub.recall.query import analyse_query, asks_for_list
from cogsub.recall.ranking import diversified, near_duplicates_last, rank_pool
from tests.services.recall.docs import doc, hits

NOW = datetime(2023, 6, 7, 13, 56, tzinfo=UTC)

LIST_QUESTIONS = [
    "What activities does Melanie partake in?",
    "Which cities has Jon visited?",
    "What items has Melanie bought?",
    "What books has Melanie read?",
    "What LGBTQ+ events has Caroline participated in?",
    "What musical artists/bands has Melanie seen?",
    "What transgender-specific events has Caroline attended?",
    "What symbols are important to Caroline?",
    "In what ways is Caroline participating in the LGBTQ community?",
    "What are some changes Caroline has faced during her transition journey?",
    "What types of pottery have Melanie and her kids made?",
    "What has Melanie painted?",
    "Where has Melanie camped?",
    "How many times has Melanie gone to the beach in 2023?",
    "How many children does Melanie have?",
    "  which   EVENTS has Jon participated in to promote his business venture?",
]

# Questions of the LoCoMo dev split that ask for one thing, and others like them.
NOT_LIST_QUESTIONS = [
    "What did Caroline research?",
    "What is Caroline's identity?",
    "What is Caroline's relationship status?",
    "Where did Caroline move from 4 years ago?",
    "What career path has Caroline decided to persue?",
    "What do Melanie's kids like?",
    "What does Melanie do to destress?",
    "What did Melanie paint recently?",
    "What kind of art does Caroline make?",
    "What kind of place does Caroline want to create for people?",
    "Who supports Caroline when she has a negative experience?",
    "What subject have Caroline and Melanie both painted?",
    "What book did Melanie read from Caroline's suggestion?",
    "Which city have both Jean and John visited?",
    "Why did Gina decide to start her own clothing store?",
    "How did Gina promote her clothes store?",
    "How long did it take for Jon to open his studio?",
    "What Jon thinks the ideal dance studio should look like?",
    "What is the status of the business class?",
    # the plural after an auxiliary is the subject: one thing is asked of it
    "What did the kids have for dinner?",
    "What did Jon's friends do for him?",
    # a past participle then "to": one aim or plan
    "What has Caroline decided to pursue?",
    "Where have Jon and Gina planned to travel?",
    # a duration is one quantity, said once
    "How many years has Caroline been a counselor?",
    "How many hours does Jon practice a day?",
    "How many months has Gina run her store?",
    # "when" questions ask for the date of one event, even of a plural one
    "When did Melanie go on a hike after the roadtrip?",
    "When did Caroline go to the LGBTQ support group?",
    "What year did Jon open his studio?",
    "When has Melanie visited the museums?",
    # yes/no questions
    "Did Jon and Gina both participate in dance competitions?",
    "Do Jon and Gina start businesses out of what they love?",
    "Has Melanie bought any items?",
    "Are the events Caroline attends public?",
    "",
    "cities",
]


@pytest.mark.parametrize("question", LIST_QUESTIONS)
def test_a_plural_thing_asked_for_is_a_list_question(question: str) -> None:
    assert asks_for_list(question)
    assert analyse_query(question).listing


@pytest.mark.parametrize("question", NOT_LIST_QUESTIONS)
def test_one_thing_asked_for_is_not_a_list_question(question: str) -> None:
    assert not asks_for_list(question)
    assert not analyse_query(question).listing


def _unit(*rows: tuple[float, ...]) -> np.ndarray:
    matrix = np.asarray(rows, dtype=np.float64)
    unit: np.ndarray = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return unit


def test_a_near_duplicate_of_a_row_above_goes_after_the_others() -> None:
    vectors = _unit((1, 0), (0.99, 0.1), (0, 1), (0.7, 0.7))
    # row 1 is ~0.995 like row 0; row 3 is ~0.71 like both 0 and 2
    assert near_duplicates_last([0, 1, 2, 3], vectors, 0.9) == [0, 2, 3, 1]
    assert near_duplicates_last([0, 1, 2, 3], vectors, 0.7) == [0, 2, 1, 3]
    assert near_duplicates_last([0, 1, 2, 3], vectors, 1.0) == [0, 1, 2, 3]
    assert near_duplicates_last([2, 3, 0, 1], vectors, 0.9) == [2, 3, 0, 1]
    assert near_duplicates_last([], vectors, 0.5) == []


def test_a_row_is_compared_with_the_kept_rows_only() -> None:
    # 1 duplicates 0 and is moved; 2 is like 1 but not like 0, so it stays
    vectors = _unit((1, 0), (math.cos(0.3), math.sin(0.3)), (math.cos(0.6), math.sin(0.6)))
    threshold = math.cos(0.45)
    assert near_duplicates_last([0, 1, 2], vectors, threshold) == [0, 2, 1]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-1, 1), st.floats(-1, 1), st.floats(0.1, 1)), max_size=12),
    st.floats(0.0, 1.0),
)
def test_near_duplicates_last_follows_its_definition(
    raw: list[tuple[float, float, float]], threshold: float
) -> None:
    vectors = _unit(*raw) if raw else np.zeros((0, 3))
    # a cosine within rounding of the threshold sides differently in a matrix product
    # and in one dot product; the definition says nothing about such a pair
    assume(np.all(np.abs(vectors @ vectors.T - threshold) > 1e-9))
    rows = list(range(len(raw)))
    kept: list[int] = []
    for row in rows:  # the definition, one pair at a time
        if all(float(vectors[other] @ vectors[row]) < threshold for other in kept):
            kept.append(row)
    expected = kept + [row for row in rows if row not in kept]
    assert near_duplicates_last(rows, vectors, threshold) == expected


def _pool(listing: bool) -> Pool:
    """Six turns: three alike in session s1 best first, then s2 and s3 ones."""
    sessions = ["s1", "s1", "s1", "s2", "s2", "s3"]
    fused = [1.0, 0.95, 0.9, 0.8, 0.75, 0.7]
    candidates = [
        Candidate(doc(f"m{n}", session=session), fused=value)
        for n, (session, value) in enumerate(zip(sessions, fused, strict=True))
    ]
    pool = Pool.of(candidates)
    pool.vectors = _unit((1, 0), (0.98, 0.2), (0.97, 0.25), (0, 1), (0.1, 1), (0.7, 0.7))
    pool.listing = listing
    return pool


def _ids(pool: Pool, policy: RankingPolicy) -> list[str]:
    return [s.candidate.document.event_id for s in rank_pool(pool, policy, now=NOW)]


BY_RELEVANCE = ["m0", "m1", "m2", "m3", "m4", "m5"]
OFF = RankingPolicy(list_diversity=0.0, list_duplicate_cosine=0.0)
LIST_POLICIES = [
    RankingPolicy(list_diversity=0.35, list_duplicate_cosine=0.0),
    RankingPolicy(list_diversity=0.0, list_duplicate_cosine=0.9),
    RankingPolicy(list_diversity=0.35, list_duplicate_cosine=0.9),
]


@pytest.mark.parametrize("policy", LIST_POLICIES)
def test_other_questions_rank_as_without_the_list_fields(policy: RankingPolicy) -> None:
    plain = rank_pool(_pool(listing=False), OFF, now=NOW)
    switched = rank_pool(_pool(listing=False), policy, now=NOW)
    assert [(s.candidate.document.event_id, s.final) for s in switched] == [
        (s.candidate.document.event_id, s.final) for s in plain
    ]
    assert _ids(_pool(listing=False), policy) == BY_RELEVANCE


def test_list_fields_off_leave_a_list_question_ranked_by_relevance() -> None:
    assert _ids(_pool(listing=True), OFF) == BY_RELEVANCE


def test_by_default_a_list_question_is_spread_across_sessions() -> None:
    assert RankingPolicy().list_diversity > 0.0
    assert _ids(_pool(listing=True), RankingPolicy()) != BY_RELEVANCE
    assert _ids(_pool(listing=False), RankingPolicy()) == BY_RELEVANCE


def test_list_diversity_spreads_a_list_question_across_sessions() -> None:
    policy = RankingPolicy(list_diversity=0.35, diversify_depth=6)
    expected = diversified(list(rank_pool(_pool(True), OFF, now=NOW)), 0.35, depth=6)
    assert _ids(_pool(True), policy) == [s.candidate.document.event_id for s in expected]
    assert _ids(_pool(True), policy) == ["m0", "m3", "m5", "m1", "m4", "m2"]


def test_near_duplicates_of_a_list_question_move_down_within_the_depth() -> None:
    assert _ids(_pool(True), replace(OFF, list_duplicate_cosine=0.9)) == [
        "m0",
        "m3",
        "m5",
        "m1",
        "m2",
        "m4",
    ]
    shallow = replace(OFF, list_duplicate_cosine=0.9, diversify_depth=3)
    assert _ids(_pool(True), shallow) == ["m0", "m1", "m2", "m3", "m4", "m5"]


def test_without_vectors_the_duplicate_rule_changes_nothing() -> None:
    pool = replace(_pool(True), vectors=None)
    assert _ids(pool, replace(OFF, list_duplicate_cosine=0.5)) == BY_RELEVANCE


def test_fusion_hands_ranking_the_listing_and_the_unit_vectors() -> None:
    a = doc("a", text="Jon: I went to Paris", embedding=(3.0, 4.0))
    b = doc("b", text="Jon: Rome was lovely", embedding=(0.0, 2.0))
    policy = RankingPolicy()
    for question, listing in (("Which cities has Jon visited?", True), ("Where is Jon?", False)):
        pool = contextual_pool(
            hits((a, 2.0), (b, 1.0)),
            [],
            query_vector=[1.0, 0.0],
            analysis=analyse_query(question),
            policy=policy,
        )
        assert pool.listing is listing
        assert pool.vectors is not None
        assert np.allclose(pool.vectors, [[0.6, 0.8], [0.0, 1.0]])


def test_list_fields_out_of_range_are_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="list_diversity must be in"):
        RankingPolicy(list_diversity=-0.1)
    with pytest.raises(ValueError, match="list_diversity must be in"):
        RankingPolicy(list_diversity=1.0)
    with pytest.raises(ValueError, match="list_duplicate_cosine must be in"):
        RankingPolicy(list_duplicate_cosine=1.5)
