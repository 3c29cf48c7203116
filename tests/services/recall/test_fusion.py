"""Contextual fusion: scaled BM25 and cosine, neighbours' shares, query cues; and RRF."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogsub.recall.context import Links, neighbour_links
from cogsub.recall.fusion import (
    _lexical,
    _median_to_best,
    _semantic,
    _unit_rows,
    contextual_fuse,
    fuse,
)
from cogsub.recall.policy import RankingPolicy
from cogsub.recall.query import analyse_query
from tests.services.recall.docs import doc, hits

QUERY_VECTOR = [1.0, 0.0]
LEXICAL_ONLY = RankingPolicy(semantic_weight=0.0)


def _fuse(text_hits, vector_hits, query="anything", policy=None, neighbours=()):
    return contextual_fuse(
        text_hits,
        vector_hits,
        query_vector=QUERY_VECTOR,
        analysis=analyse_query(query),
        policy=policy or RankingPolicy(),
        neighbours=neighbours,
    )


def _by_id(candidates):
    return {c.document.event_id: c for c in candidates}


def test_no_candidates_no_result() -> None:
    assert _fuse([], []) == []


def test_scores_are_scaled_to_the_pool_and_summed_by_weight() -> None:
    a = doc("a", embedding=(1.0, 0.0))  # cosine 1
    b = doc("b", embedding=(0.0, 1.0))  # cosine 0
    c = doc("c", embedding=(0.6, 0.8))  # cosine 0.6, the median: semantic 0
    result = _fuse(hits((a, 10.0), (b, 5.0)), hits((a, 1.0), (c, 0.6)))
    assert [x.document.event_id for x in result] == ["a", "b", "c"]
    found = _by_id(result)
    assert found["a"].fused == 1.0 and found["a"].semantic == 1.0 and found["a"].lexical == 1.0
    # b: lexical 0.5, semantic 0 -> 0.5 of a's 1.5.
    assert found["b"].fused == pytest.approx(0.5 / 1.5)
    assert found["c"].fused == 0.0 and found["c"].lexical == 0.0
    assert found["c"].cosine == pytest.approx(0.6) and found["b"].cosine == pytest.approx(0.0)
    assert (found["a"].bm25_rank, found["a"].vector_rank) == (1, 1)
    assert (found["c"].bm25_rank, found["c"].vector_rank) == (None, 2)


def test_the_answer_after_a_question_inherits_the_question_score() -> None:
    question = doc("q", text="Alice: Which instrument do you play?", session="s", at=0)
    answer = doc("r", text="Bob: The cello, for ten years.", session="s", at=1)
    other = doc("z", text="Bob: I play chess.", at=2)  # no session: no neighbours
    result = _fuse(hits((question, 4.0), (other, 2.0)), hits((answer, 0.1)), policy=LEXICAL_ONLY)
    found = _by_id(result)
    # The answer matched no query word, yet it ranks with the question it answers.
    assert found["r"].lexical == pytest.approx(found["q"].lexical) == pytest.approx(1.0)
    assert found["r"].context == pytest.approx(1.0)
    assert found["q"].context == 0.0  # the answer had no BM25 of its own to pass back
    assert found["z"].fused == pytest.approx(0.5)


def test_a_statement_passes_on_less_than_a_question_and_the_next_turn_less_still() -> None:
    first = doc("a", text="Alice: I took up the cello.", session="s", at=0)
    second = doc("b", text="Bob: Nice.", session="s", at=1)
    third = doc("c", text="Alice: Thanks!", session="s", at=2)
    policy = LEXICAL_ONLY
    found = _by_id(_fuse(hits((second, 2.0)), hits((first, 0.0), (third, 0.0)), policy=policy))
    assert found["c"].context == pytest.approx(policy.context_before)  # after a statement
    assert found["a"].context == pytest.approx(policy.context_after)


def test_two_turns_away_passes_on_a_smaller_share() -> None:
    first = doc("a", text="Alice: I took up the cello.", session="s", at=0)
    second = doc("b", text="Bob: Oh?", session="s", at=1)
    third = doc("c", text="Alice: Yes!", session="s", at=2)
    policy = RankingPolicy(semantic_weight=0.0, context_second=0.5)
    found = _by_id(_fuse(hits((first, 2.0)), hits((second, 0.0), (third, 0.0)), policy=policy))
    assert found["b"].context == pytest.approx(policy.context_before)
    assert found["c"].context == pytest.approx(0.5 * policy.context_before)
    assert found["a"].context == 0.0
    flat = RankingPolicy(semantic_weight=0.0, context_second=0.0)
    unlinked = _by_id(_fuse(hits((first, 2.0)), hits((second, 0.0), (third, 0.0)), policy=flat))
    assert unlinked["c"].context == 0.0


def test_neighbours_no_search_returned_join_the_pool_and_inherit_context() -> None:
    question = doc("q", text="Alice: Which instrument do you play?", session="s", at=0)
    answer = doc("r", text="Bob: The cello.", session="s", at=1, embedding=(0.6, 0.8))
    unrelated = [(doc(n, embedding=(0.0, 1.0)), 0.0) for n in ("d", "e", "f")]
    alone = _by_id(_fuse(hits((question, 3.0)), hits(*unrelated)))
    assert "r" not in alone
    found = _by_id(_fuse(hits((question, 3.0)), hits(*unrelated), neighbours=[answer]))
    joined = found["r"]
    assert (joined.bm25_rank, joined.vector_rank, joined.bm25_score) == (None, None, None)
    assert joined.cosine == pytest.approx(0.6)  # from its own embedding
    assert joined.context == pytest.approx(1.0)  # the question before it, in full
    assert joined.fused > found["d"].fused


def test_neighbour_embeddings_enter_the_semantic_score() -> None:
    near = doc("a", session="s", at=0, embedding=(0.0, 1.0))
    after = doc("b", session="s", at=1, embedding=(1.0, 0.0))
    alone = doc("c", embedding=(0.0, 1.0))
    others = [(doc(name, embedding=(0.0, 1.0)), 0.0) for name in ("d", "e")]  # median 0
    found = _by_id(_fuse([], hits((after, 1.0), (near, 0.0), (alone, 0.0), *others)))
    # Same own embedding, but "a" sits next to a turn that matches the query.
    assert found["a"].semantic > found["c"].semantic
    assert found["a"].cosine == found["c"].cosine == pytest.approx(0.0)


def test_the_named_speaker_is_preferred_unless_two_speakers_are_named() -> None:
    by_bob = doc("a", text="Bob: I play the cello.")
    about_bob = doc("b", text="Alice: Bob plays the cello.")
    text_hits = hits((by_bob, 1.0), (about_bob, 1.0))
    found = _by_id(_fuse(text_hits, [], query="What does Bob play?", policy=LEXICAL_ONLY))
    # The default boost doubles the named speaker's turns (the vector query is name-free).
    assert found["a"].boost == pytest.approx(2.0) and found["b"].boost == 1.0
    assert found["a"].fused == 1.0 and found["b"].fused == pytest.approx(1 / 2.0)
    both = _by_id(_fuse(text_hits, [], query="What do Alice and Bob play?"))
    assert both["a"].boost == both["b"].boost == 1.0


def test_the_subject_of_two_named_speakers_is_preferred_only_when_asked() -> None:
    by_alice = doc("a", text="Alice: I think adopting is wonderful.")
    by_bob = doc("b", text="Bob: I decided to adopt.")
    text_hits = hits((by_alice, 1.0), (by_bob, 1.0))
    query = "What does Alice think about Bob's decision to adopt?"
    off = _by_id(_fuse(text_hits, [], query=query))
    assert off["a"].boost == off["b"].boost == 1.0  # two speakers named: no cue by default
    on = _by_id(_fuse(text_hits, [], query=query, policy=RankingPolicy(subject_boost=0.25)))
    assert on["a"].boost == pytest.approx(1.25) and on["b"].boost == 1.0
    joined = _by_id(
        _fuse(text_hits, [], query="Do Alice and Bob adopt?", policy=RankingPolicy(subject_boost=1))
    )
    assert joined["a"].boost == joined["b"].boost == 1.0
    with pytest.raises(ValueError, match="subject_boost must be at least 0"):
        RankingPolicy(subject_boost=-0.5)


def test_when_questions_prefer_memories_that_say_when() -> None:
    dated = doc("a", text="I went to the group yesterday.")
    undated = doc("b", text="The group was powerful.")
    text_hits = hits((dated, 1.0), (undated, 1.0))
    found = _by_id(_fuse(text_hits, [], query="When did Alice go to the group?"))
    assert found["a"].boost == pytest.approx(1.4) and found["b"].boost == 1.0
    found = _by_id(_fuse(text_hits, [], query="Where did Alice go?"))
    assert found["a"].boost == found["b"].boost == 1.0


def test_a_date_in_the_query_prefers_memories_of_that_day() -> None:
    that_day = doc("a", at=3_600)  # 8 May 2023, 14:56
    next_day = doc("b", at=86_400)
    text_hits = hits((that_day, 1.0), (next_day, 1.0))
    found = _by_id(_fuse(text_hits, [], query="what happened on 8 May, 2023"))
    assert found["a"].boost == pytest.approx(1.3) and found["b"].boost == 1.0


def test_without_usable_embeddings_the_engine_scores_stand_in() -> None:
    odd = doc("a", embedding=(1.0, 0.0, 0.0))  # not the query's dimension
    near, far = doc("b", embedding=()), doc("c", embedding=())
    found = _by_id(_fuse(hits((odd, 2.0)), hits((near, 0.9), (far, 0.2))))
    assert found["b"].semantic == 1.0 and found["c"].semantic == 0.0
    assert found["a"].semantic == 0.0  # no engine score: the pool's lowest
    assert found["a"].lexical == 1.0 and found["a"].cosine is None  # unknown, not made up


def test_rrf_ranks_first_by_both_as_one() -> None:
    a, b = doc("a"), doc("b")
    result = fuse(hits((a, 3.0), (b, 1.0)), hits((a, 0.9)))
    assert [c.document.event_id for c in result] == ["a", "b"]
    assert result[0].fused == 1.0 and result[1].fused == pytest.approx(0.5 * 61 / 62)


def _lexical_turn_by_turn(bm25, docs, links, policy):
    """The definition, a turn at a time: what the array form must equal to the bit."""
    best = float(bm25.max()) if bm25.size else 0.0
    own = bm25 / best if best > 0.0 else np.zeros_like(bm25)
    context = np.zeros_like(own)
    second = policy.context_second
    for i in range(len(docs)):
        before, after = links.before[i], links.after[i]
        if before is not None:
            asked = "?" in docs[before].summary
            share = policy.context_before_question if asked else policy.context_before
            context[i] += share * own[before]
            if (further := links.before[before]) is not None:
                context[i] += second * policy.context_before * own[further]
        if after is not None:
            context[i] += policy.context_after * own[after]
            if (further := links.after[after]) is not None:
                context[i] += second * policy.context_after * own[further]
    total = own + context
    top = float(total.max())
    return (total, context) if top <= 0.0 else (total / top, context / top)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0.0, 30.0),  # BM25
            st.sampled_from(["s1", "s2", None]),  # session
            st.integers(0, 40),  # minutes into the session
            st.booleans(),  # asks a question
        ),
        min_size=1,
        max_size=30,
    ),
    st.floats(0.0, 2.0),
)
def test_neighbours_shares_as_arrays_equal_the_turn_by_turn_sum(rows, before_question) -> None:
    docs = [
        doc(f"t{n}", text="why?" if asked else "so.", session=session, at=60.0 * minute)
        for n, (_, session, minute, asked) in enumerate(rows)
    ]
    bm25 = np.array([score for score, *_ in rows], dtype=np.float64)
    policy = RankingPolicy(context_before_question=before_question)
    links = neighbour_links(docs, max_gap_s=policy.neighbour_gap_s)
    total, context = _lexical(bm25, docs, links, policy)
    expected_total, expected_context = _lexical_turn_by_turn(bm25, docs, links, policy)
    assert total.tolist() == expected_total.tolist()
    assert context.tolist() == expected_context.tolist()


def _semantic_row_by_row(
    vectors: np.ndarray, query: np.ndarray, links: Links, policy: RankingPolicy
) -> list[float]:
    """The contextual cosine as it was first written: one row and one side at a time."""
    unit = _unit_rows(vectors)
    mixed = unit.copy()
    for side in (links.before, links.after):
        for i, j in enumerate(side):
            if j is not None:
                mixed[i] += policy.vector_context * unit[j]
    q = query / (float(np.linalg.norm(query)) or 1.0)
    return list(_median_to_best(_unit_rows(mixed) @ q).tolist())


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["s1", "s2", None]),  # session
            st.integers(0, 40),  # minutes into the session
            st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=4),  # vector
        ),
        min_size=1,
        max_size=30,
    ),
    st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=4),
    st.floats(0.0, 1.0),
)
def test_contextual_cosine_as_arrays_equals_the_row_by_row_sum(rows, query, weight) -> None:
    docs = [
        doc(f"t{n}", session=session, at=60.0 * minute)
        for n, (session, minute, _) in enumerate(rows)
    ]
    vectors = np.array([vector for *_, vector in rows], dtype=np.float64)
    policy = RankingPolicy(vector_context=weight)
    links = neighbour_links(docs, max_gap_s=policy.neighbour_gap_s)
    _, semantic = _semantic(vectors, query, links, policy, engine_scores=[None] * len(rows))
    expected = _semantic_row_by_row(vectors, np.array(query), links, policy)
    assert semantic.tolist() == expected
