"""Leave-one-conversation-out: score each conversation with settings chosen on the others (pure).

A run keeps what every question got (:class:`Answered`) per conversation and per
candidate ranking policy. For each held-out conversation, :func:`choose` picks the
candidate that did best on every *other* conversation; the held-out conversation
is then scored with that candidate only, so no setting is ever judged on the
questions it was picked on. With one candidate nothing is picked: each fold is
that conversation scored with the fixed policy.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cogsub.evaluation.metrics import Scoreboard, evidence_recall


@dataclass(frozen=True)
class Answered:
    """One question's evidence and what each arm ranked for it (memory dia_ids, best first)."""

    category: str
    evidence: tuple[str, ...]
    pipeline: tuple[str, ...]
    bm25: tuple[str, ...]
    vector: tuple[str, ...]

    def record(self, board: Scoreboard) -> None:
        board.add("pipeline", self.category, self.pipeline, self.evidence)
        board.add("bm25", self.category, self.bm25, self.evidence)
        board.add("vector", self.category, self.vector, self.evidence)


def selection_score(answered: Iterable[Answered], k: int) -> float:
    """Mean of any@k + all@k of the pipeline: the quantity a candidate is chosen by."""
    total, count = 0, 0
    for item in answered:
        any_hit, all_hit = evidence_recall(item.pipeline, item.evidence, k)
        total += any_hit + all_hit
        count += 1
    return total / count if count else 0.0


def choose(runs: Mapping[str, Sequence[Sequence[Answered]]], held_out: str, k: int) -> int:
    """The candidate (index) with the best selection score on every conversation but ``held_out``.

    ``runs[conversation][candidate]`` is what that candidate answered there. Ties
    go to the earlier candidate, so listing the current default first keeps it
    unless another is strictly better.
    """
    candidates = len(next(iter(runs.values())))
    training = [name for name in runs if name != held_out]
    if candidates == 1 or not training:
        return 0
    scores = [
        selection_score((a for name in training for a in runs[name][c]), k)
        for c in range(candidates)
    ]
    return max(range(candidates), key=lambda c: (scores[c], -c))


def spread(values: Sequence[float]) -> dict[str, float]:
    """min, max, mean and range (max − min) of one rate across folds."""
    if not values:
        return {"min": 0.0, "max": 0.0, "mean": 0.0, "range": 0.0}
    low, high = min(values), max(values)
    return {
        "min": low,
        "max": high,
        "mean": round(statistics.fmean(values), 4),
        "range": round(high - low, 4),
    }
