"""The semantic arm scored against a second query vector, the question's content."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogsub.recall.context import neighbour_links
from cogsub.recall.fusion import _median_to_best, _semantic, _semantic_arm, contextual_pool
from cogsub.recall.policy import RankingPolicy
from cogsub.recall.query import analyse_query
from tests.services.recall.docs import doc, hits

QUESTION = [1.0, 0.0, 0.0]
CONTENT = [0.0, 2.0, 0.0]  # not unit: fusion normalises it

# "q" is like the question, "a" like its content, "f" like neither.
LIKE_QUESTION = doc("q", embedding=(1.0, 0.0, 0.0))
LIKE_CONTENT = doc("a", embedding=(0.0, 1.0, 0.0))
FILLER = [doc(f"f{n}", embedding=(0.0, 0.0, 1.0)) for n in range(3)]
VECTOR = hits(*[(d, 0.0) for d in (LIKE_QUESTION, LIKE_CONTENT, *FILLER)])


def _pool(policy, content=CONTENT):
    return contextual_pool(
        [],
        VECTOR,
        query_vector=QUESTION,
        analysis=analyse_query("what"),
        policy=policy,
        content_vector=content,
    )


def _semantic_of(pool, event_id):
    assert pool.semantic is not None
    return pool.semantic[[d.event_id for d in pool.documents].index(event_id)]


def test_off_ignores_the_content_vector_to_the_bit() -> None:
    without = _pool(RankingPolicy(), content=None)
    for policy in (RankingPolicy(), RankingPolicy(content_weight=0.9)):
        ignored = _pool(policy)
        assert ignored.fused == without.fused and ignored.semantic == without.semantic
    assert _semantic_of(without, "a") == 0.0  # the question alone does not see "a"


def test_max_lets_a_turn_like_the_content_score_as_high_as_one_like_the_question() -> None:
    pool = _pool(RankingPolicy(content_vector="max"))
    assert _semantic_of(pool, "q") == 1.0 and _semantic_of(pool, "a") == 1.0
    assert _semantic_of(pool, "f0") == 0.0
    # The raw cosine in the breakdown stays the vector query's.
    assert pool.measured is not None and pool.measured[1] == 0.0


def test_the_mean_weighs_the_content_by_its_share() -> None:
    pool = _pool(RankingPolicy(content_vector="mean", content_weight=0.25))
    # Cosines: q (0.75), a (0.25), fillers 0 (the median): scaled by the best.
    assert _semantic_of(pool, "q") == 1.0
    assert _semantic_of(pool, "a") == pytest.approx(0.25 / 0.75)
    no_share = _pool(RankingPolicy(content_vector="mean", content_weight=0.0))
    assert no_share.semantic == _pool(RankingPolicy(), content=None).semantic


def test_a_content_vector_of_another_width_is_ignored() -> None:
    pool = _pool(RankingPolicy(content_vector="max"), content=[1.0, 0.0])
    assert pool.semantic == _pool(RankingPolicy(), content=None).semantic


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["s1", "s2"]),
            st.integers(0, 30),
            st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3),
        ),
        min_size=1,
        max_size=20,
    ),
    st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3),
    st.sampled_from(["max", "mean"]),
    st.floats(0.0, 1.0),
)
def test_the_joined_arm_is_the_definition(rows, content, how, share) -> None:
    docs = [doc(f"t{n}", session=s, at=60.0 * minute) for n, (s, minute, _) in enumerate(rows)]
    vectors = np.array([vector for *_, vector in rows], dtype=np.float64)
    policy = RankingPolicy(content_vector=how, content_weight=share)
    links = neighbour_links(docs, max_gap_s=policy.neighbour_gap_s)
    _, semantic = _semantic(
        vectors, QUESTION, links, policy, engine_scores=[None] * len(rows), content_vector=content
    )
    arm = _semantic_arm(vectors, QUESTION, links, policy)
    assert arm is not None
    second = np.asarray(content) / (float(np.linalg.norm(content)) or 1.0)
    first, other = arm.mixed @ arm.query, arm.mixed @ second
    joined = np.maximum(first, other) if how == "max" else (1 - share) * first + share * other
    assert semantic == pytest.approx(_median_to_best(joined), abs=1e-12)
    if how == "mean" and share == 0.0:
        off = RankingPolicy()
        _, alone = _semantic(vectors, QUESTION, links, off, engine_scores=[None] * len(rows))
        assert semantic.tolist() == alone.tolist()
