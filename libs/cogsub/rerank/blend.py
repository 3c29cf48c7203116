"""Pure arithmetic of reranking: scores onto one scale, then blended into the ranking.

A candidate's new score is ``(1 − w) · final + w · r``, where ``final`` is the score
recall's ranking gave it and ``r`` the reranker's score in [0, 1]. Candidates past
the reranked head get ``(1 − w) · final`` (``r`` counts as 0), so none of them can
overtake a reranked one: the head was chosen because it ranked higher.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Blended", "blend", "normalised"]


def _logistic(x: float) -> float:
    # Written per sign so that exp never overflows on large logits.
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def normalised(scores: Sequence[float]) -> list[float]:
    """Scores in [0, 1]: kept when they all are (probabilities), else the logistic of each.

    TEI (``raw_scores: false``), Cohere and Jina answer probabilities; a server that
    returns raw logits is mapped the way those servers map them. No min-max scaling:
    it would turn a shrug between two irrelevant texts into the full range.
    """
    if all(0.0 <= s <= 1.0 for s in scores):
        return [float(s) for s in scores]
    return [_logistic(s) for s in scores]


@dataclass(frozen=True)
class Blended:
    """One candidate after blending: where it was, its reranker score, its new score."""

    position: int
    rerank: float | None  # None past the reranked head
    final: float


def blend(finals: Sequence[float], rerank: Sequence[float], weight: float) -> list[Blended]:
    """Candidates best first by blended score; ties keep the ranking's order.

    Args:
        finals: The ranking's scores, best first.
        rerank: Normalised scores of the first ``len(rerank)`` candidates.
        weight: ``w`` in [0, 1]; 0 keeps the ranking, 1 orders the head by the reranker.
    """
    if len(rerank) > len(finals):
        raise ValueError(f"{len(rerank)} rerank scores for {len(finals)} candidates")
    keep = 1.0 - weight
    blended = [
        Blended(i, r, keep * f + weight * r)
        for i, (f, r) in enumerate(zip(finals, rerank, strict=False))
    ]
    blended += [Blended(i, None, keep * finals[i]) for i in range(len(rerank), len(finals))]
    return sorted(blended, key=lambda b: (-b.final, b.position))
