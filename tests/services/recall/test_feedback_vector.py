"""Pseudo-relevance feedback on the semantic arm: the query vector moved toward the best hits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogsub.recall.context import neighbour_links
from cogsub.recall.fusion import (
    _boosts,
    _fed_back,
    _lexical,
    _median_to_best,
    _semantic,
    _semantic_arm,
    _unit_rows,
    contextual_pool,
)
from cogsub.recall.policy import RankingPolicy
from cogsub.recall.query import analyse_query
from cogsub.recall.traits import traits_of
from tests.services.recall.docs import doc, hits

QUERY = [1.0, 0.0, 0.0]


def _pool(text_hits, vector_hits, policy, *, query="what", neighbours=(), vector=QUERY):
    return contextual_pool(
        text_hits,
        vector_hits,
        query_vector=vector,
        analysis=analyse_query(query),
        policy=policy,
        neighbours=neighbours,
    )


def _row(pool, event_id):
    return [d.event_id for d in pool.documents].index(event_id)


# The best lexical hits all point one way (0.6, 0.8, 0); "x" shares that direction's second
# axis but not the query's, "o" leans toward the query but away from the hits.
HITS = [doc(f"h{n}", embedding=(0.6, 0.8, 0.0)) for n in range(3)]
ALIKE = doc("x", embedding=(0.0, 1.0, 0.0))
OFF_TOPIC = doc("o", embedding=(0.3, 0.0, 0.954))
FILLER = [doc(f"f{n}", embedding=(0.0, 0.0, 1.0)) for n in range(4)]
TEXT = hits(*[(d, 10.0 - n) for n, d in enumerate(HITS)])
VECTOR = hits(*[(d, 0.0) for d in (ALIKE, OFF_TOPIC, *FILLER)])


def test_a_candidate_like_the_best_hits_but_not_the_query_rises() -> None:
    off = _pool(TEXT, VECTOR, RankingPolicy())
    on = _pool(TEXT, VECTOR, RankingPolicy(feedback_weight=1.0))
    x_off, o_off = off.fused[_row(off, "x")], off.fused[_row(off, "o")]
    x_on, o_on = on.fused[_row(on, "x")], on.fused[_row(on, "o")]
    assert x_off < o_off
    assert x_on > o_on
    assert on.semantic is not None and off.semantic is not None
    assert on.semantic[_row(on, "x")] > off.semantic[_row(off, "x")]


def test_the_breakdown_is_the_semantic_column_that_was_used() -> None:
    policy = RankingPolicy(feedback_weight=0.5)
    pool = _pool(TEXT, VECTOR, policy)
    assert pool.lexical is not None and pool.semantic is not None and pool.boost is not None
    lexical, semantic, boost = (np.array(c) for c in (pool.lexical, pool.semantic, pool.boost))
    relevance = (policy.lexical_weight * lexical + policy.semantic_weight * semantic) * boost
    assert pool.fused == (relevance / relevance.max()).tolist()
    # The moved query, by hand: q + 0.5 · mean of the three hits, then unit.
    moved = np.array(QUERY) + 0.5 * _unit_rows(np.array([[0.6, 0.8, 0.0]]))[0]
    moved /= np.linalg.norm(moved)
    vectors = _unit_rows(np.array([d.embedding for d in pool.documents], dtype=np.float64))
    assert pool.semantic == pytest.approx(_median_to_best(vectors @ moved).tolist())
    # The raw cosine stays the question's own: it is what the vector search measured.
    assert pool.measured == pytest.approx((vectors @ np.array(QUERY)).tolist())


def test_the_best_fused_rows_are_taken_and_ties_keep_pooling_order() -> None:
    docs = [doc(f"d{n}", embedding=vector) for n, vector in enumerate(np.eye(3))]
    links = neighbour_links(docs, max_gap_s=3_600.0)
    policy = RankingPolicy(feedback_weight=1.0, feedback_depth=2)
    arm = _semantic_arm(np.eye(3), QUERY, links, policy)
    assert arm is not None
    # d1 and d2 tie below d0: the first two in pooling order are d0 and d1.
    moved = _fed_back(arm, np.array([2.0, 1.0, 1.0]), policy)
    expected = np.array([1.5, 0.5, 0.0])
    assert moved.tolist() == pytest.approx((expected / np.linalg.norm(expected)).tolist())
    moved = _fed_back(arm, np.array([0.0, 1.0, 3.0]), policy)
    expected = np.array([1.0, 0.5, 0.5])
    assert moved.tolist() == pytest.approx((expected / np.linalg.norm(expected)).tolist())


def test_with_context_the_hits_neighbour_mixed_vectors_are_averaged() -> None:
    first = doc("a", session="s", at=0, embedding=(1.0, 0.0, 0.0))
    second = doc("b", session="s", at=1, embedding=(0.0, 1.0, 0.0))
    docs = [first, second]
    links = neighbour_links(docs, max_gap_s=3_600.0)
    matrix = np.array([d.embedding for d in docs])
    plain = RankingPolicy(feedback_weight=1.0, feedback_depth=1)
    mixed = RankingPolicy(feedback_weight=1.0, feedback_depth=1, feedback_context=True)
    arm = _semantic_arm(matrix, [0.0, 0.0, 1.0], links, plain)
    assert arm is not None
    best_second = np.array([0.0, 1.0])
    assert _fed_back(arm, best_second, plain).tolist() == pytest.approx([0.0, 2**-0.5, 2**-0.5])
    # b's context vector carries 0.3 of a's: the moved query now leans toward a too.
    with_context = _fed_back(arm, best_second, mixed)
    assert with_context[0] > 0.0
    expected = np.array([0.0, 0.0, 1.0]) + arm.mixed[1]
    assert with_context.tolist() == pytest.approx((expected / np.linalg.norm(expected)).tolist())


def test_without_usable_vectors_feedback_changes_nothing() -> None:
    ragged = [doc("a", embedding=(1.0, 0.0)), doc("b", embedding=(1.0, 0.0, 0.0))]
    text, vector = hits((ragged[0], 2.0)), hits((ragged[1], 0.4), (ragged[0], 0.9))
    off = _pool(text, vector, RankingPolicy())
    on = _pool(text, vector, RankingPolicy(feedback_weight=1.0))
    assert on.fused == off.fused and on.semantic == off.semantic


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"feedback_weight": -0.1}, "feedback_weight must be at least 0"),
        ({"feedback_weight": float("nan")}, "feedback_weight must be at least 0 and finite"),
        ({"feedback_weight": float("inf")}, "feedback_weight must be at least 0 and finite"),
        ({"feedback_depth": 0}, "feedback_depth must be at least 1"),
    ],
)
def test_a_bad_feedback_setting_is_refused_by_name(changes, message) -> None:
    with pytest.raises(ValueError, match=message):
        RankingPolicy(**changes)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0.0, 20.0),  # BM25
            st.sampled_from(["s1", "s2", None]),  # session
            st.integers(0, 40),  # minutes into the session
            st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3),  # vector
            st.booleans(),  # a text hit
        ),
        min_size=1,
        max_size=25,
    ),
    st.integers(1, 6),
    st.booleans(),
)
def test_off_is_todays_fusion_to_the_bit(rows, depth, context) -> None:
    docs = [
        doc(f"t{n}", text="Alice: why?", session=session, at=60.0 * minute, embedding=vector)
        for n, (_, session, minute, vector, _) in enumerate(rows)
    ]
    text = hits(*[(d, row[0]) for d, row in zip(docs, rows, strict=True) if row[4]])
    vector = hits(*[(d, 0.5) for d, row in zip(docs, rows, strict=True) if not row[4]])
    query = "when did Alice ask?"
    off = RankingPolicy(feedback_weight=0.0, feedback_depth=depth, feedback_context=context)
    pool = _pool(text, vector, off, query=query)
    # Today's fusion composed from its parts, in the pool's own row order.
    links = neighbour_links(pool.documents, max_gap_s=off.neighbour_gap_s)
    bm25 = np.array([max(0.0, s or 0.0) for s in pool.bm25_score])
    lexical, _ = _lexical(bm25, pool.documents, links, off)
    matrix = np.array([d.embedding for d in pool.documents], dtype=np.float64)
    _, semantic = _semantic(matrix, QUERY, links, off, engine_scores=pool.cosine)
    traits = [traits_of(d) for d in pool.documents]
    boost = _boosts(pool.documents, traits, analyse_query(query), off)
    fused = (off.lexical_weight * lexical + off.semantic_weight * semantic) * boost
    best = float(fused.max())
    assert pool.fused == ((fused / best).tolist() if best > 0.0 else [0.0] * len(docs))
    assert pool.semantic == semantic.tolist()
    assert _pool(text, vector, RankingPolicy(), query=query).fused == pool.fused
