"""Pure reranking arithmetic: scores onto [0, 1], then blended into the ranking."""

from __future__ import annotations

import math

import pytest

from cogsub.rerank import Blended, blend, normalised


def test_probabilities_are_kept_as_they_come() -> None:
    assert normalised([0.0, 0.25, 1.0]) == [0.0, 0.25, 1.0]


def test_a_shrug_between_irrelevant_texts_stays_a_shrug() -> None:
    # Min-max scaling would make these 0 and 1.
    assert normalised([0.010, 0.011]) == [0.010, 0.011]


def test_logits_go_through_the_logistic_without_overflow() -> None:
    scores = normalised([-2.0, 0.0, 3.0, 1_000.0, -1_000.0])
    assert scores[:3] == pytest.approx([1 / (1 + math.e**2), 0.5, 1 / (1 + math.e**-3)])
    assert scores[3] == 1.0
    assert scores[4] == 0.0
    assert scores == sorted(scores[:3]) + scores[3:]


def test_weight_zero_keeps_the_ranking() -> None:
    order = blend([0.9, 0.5, 0.1], [0.0, 0.5, 1.0], weight=0.0)
    assert [b.position for b in order] == [0, 1, 2]
    assert [b.final for b in order] == [0.9, 0.5, 0.1]


def test_weight_one_orders_the_head_by_the_reranker() -> None:
    order = blend([0.9, 0.5, 0.1], [0.2, 0.7, 0.9], weight=1.0)
    assert order == [Blended(2, 0.9, 0.9), Blended(1, 0.7, 0.7), Blended(0, 0.2, 0.2)]


def test_the_blend_weighs_both_scores() -> None:
    order = blend([0.8, 0.6], [0.2, 0.9], weight=0.5)
    assert [b.position for b in order] == [1, 0]
    assert [b.final for b in order] == pytest.approx([0.75, 0.5])


def test_no_candidate_past_the_head_overtakes_a_reranked_one() -> None:
    # Position 2 was not reranked: it counts a rerank score of 0 and stays below.
    order = blend([0.9, 0.8, 0.79], [0.0, 0.0], weight=0.3)
    assert [b.position for b in order] == [0, 1, 2]
    assert order[2].rerank is None
    assert order[2].final == pytest.approx(0.7 * 0.79)


def test_ties_keep_the_rankings_order() -> None:
    order = blend([0.5, 0.5, 0.5], [0.4, 0.4, 0.4], weight=0.5)
    assert [b.position for b in order] == [0, 1, 2]


def test_more_scores_than_candidates_is_a_bug() -> None:
    with pytest.raises(ValueError, match="3 rerank scores for 2"):
        blend([0.5, 0.4], [0.1, 0.2, 0.3], weight=0.5)
