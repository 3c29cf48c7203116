"""Pure recall ranking: fused relevance, then policy-weighted scoring.

Nothing here does I/O, so every rule is tested exhaustively without servers.
``docs/ranking.md`` states the formulas; :mod:`cogsub.recall.fusion` turns the
BM25 and vector candidates into one relevance value per memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Literal

from cogsub.core.events import FactType
from cogsub.core.memory import PROCEDURE_TAG_PREFIX, VERSION_TAG_PREFIX, ScoreBreakdown
from cogsub.recall.fusion import RRF_K, Candidate, contextual_fuse, fuse

__all__ = [
    "RRF_K",
    "Budget",
    "Candidate",
    "RankingPolicy",
    "Scored",
    "contextual_fuse",
    "count_bonus",
    "estimate_tokens",
    "fuse",
    "newest_versions",
    "novelty",
    "procedure_version",
    "rank",
    "recency",
    "score",
]


@dataclass(frozen=True)
class RankingPolicy:
    """Weights of each signal in the final score, and the shapes of the signals.

    The fields from ``fusion`` on shape relevance (:mod:`cogsub.recall.fusion`); the
    contextual defaults were set on the LoCoMo development split, where the
    response to each is flat around its value (about ±0.01 recall@10 for ±50 %).
    """

    relevance: float = 0.80
    importance: float = 0.05
    recency: float = 0.05
    reward: float = 0.04
    novelty: float = 0.04
    reinforcement: float = 0.02  # the count bonus cb of cb · log2(1 + count)
    type_boost: float = 0.10  # applied to observations when prefer_observations is asked
    recency_half_life_days: float = 30.0
    novelty_decay: float = 0.5
    rrf_k: int = RRF_K  # for fusion = "rrf"
    fusion: Literal["contextual", "rrf"] = "contextual"
    lexical_weight: float = 1.0
    semantic_weight: float = 0.5
    context_before: float = 0.5  # share of the previous turn's BM25 a turn receives
    context_before_question: float = 1.0  # ... when that turn asked a question
    context_after: float = 0.3  # share of the next turn's BM25
    context_second: float = 0.3  # of those shares, what comes from two turns away
    expand_top: int = 30  # the best hits of each search whose session neighbours join the pool
    expand_each_side: int = 3  # neighbours fetched before and after each of those hits
    vector_context: float = 0.3  # weight of each neighbour's embedding in a turn's context vector
    neighbour_gap_s: float = 3_600.0  # turns further apart than this are not neighbours
    # The query names the memory's speaker. With names kept out of the vector query
    # (``name_free_vector``) this cue is what ties the answer to the person.
    speaker_boost: float = 1.0
    name_free_vector: bool = True  # embed the query without the names it contains
    temporal_boost: float = 0.4  # a "when" question, and the memory says when
    date_boost: float = 0.3  # the query names the day or month the memory is from

    def weights(self) -> dict[str, float]:
        return {
            "relevance": self.relevance,
            "importance": self.importance,
            "recency": self.recency,
            "reward": self.reward,
            "novelty": self.novelty,
            "reinforcement": self.reinforcement,
            "type_boost": self.type_boost,
        }


def recency(timestamp: str, now: datetime, *, half_life_days: float) -> float:
    """1 for now, halving every ``half_life_days`` into the past; future times count as now."""
    then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    age_days = max(0.0, (now - then).total_seconds() / 86_400)
    return math.exp(-math.log(2) * age_days / half_life_days)


def count_bonus(count: int) -> float:
    """log2(1 + count): reinforcement grows with use, ever more slowly."""
    return math.log2(1 + max(0, count))


def novelty(age_turns: int | None, *, decay: float) -> float:
    """1 if not yet retrieved this session, else 1 − decay^age (age 0 = the turn after)."""
    if age_turns is None:
        return 1.0
    return 1.0 - decay ** max(0, age_turns)


@dataclass(frozen=True)
class Scored:
    """A candidate, its signals and the weighted sum of them (``final``)."""

    candidate: Candidate
    signals: Mapping[str, float]
    weights: Mapping[str, float]
    final: float

    @cached_property
    def breakdown(self) -> ScoreBreakdown:
        """Every signal and weight (built on demand: only returned hits need one)."""
        candidate = self.candidate
        return ScoreBreakdown(
            **self.signals,
            weights=dict(self.weights),
            final=self.final,
            bm25_rank=candidate.bm25_rank,
            vector_rank=candidate.vector_rank,
            bm25_score=candidate.bm25_score,
            cosine=candidate.cosine,
            lexical=candidate.lexical,
            semantic=candidate.semantic,
            context=candidate.context,
            boost=candidate.boost,
        )


def score(
    candidate: Candidate,
    policy: RankingPolicy,
    *,
    now: datetime,
    novelty_age: int | None,
    prefer_observations: bool,
    weights: Mapping[str, float] | None = None,
) -> Scored:
    """The policy-weighted score; ``weights`` defaults to ``policy.weights()``."""
    doc = candidate.document
    signals = {
        "relevance": candidate.fused,
        "importance": doc.importance_score * doc.decay_factor,
        "recency": recency(doc.timestamp, now, half_life_days=policy.recency_half_life_days),
        "reward": doc.reward_score,
        "novelty": novelty(novelty_age, decay=policy.novelty_decay),
        "reinforcement": count_bonus(doc.retrieval_count),
        "type_boost": 1.0 if prefer_observations and doc.fact_type is FactType.OBSERVATION else 0.0,
    }
    weights = weights if weights is not None else policy.weights()
    final = sum(weights[name] * value for name, value in signals.items())
    return Scored(candidate, signals, weights, final)


def rank(
    candidates: Sequence[Candidate],
    policy: RankingPolicy,
    *,
    now: datetime,
    novelty_ages: Mapping[str, int] | None = None,
    prefer_observations: bool = False,
) -> list[Scored]:
    """Candidates best first by final score (ties by fused relevance, then id)."""
    ages = novelty_ages or {}
    weights = policy.weights()
    scored = [
        score(
            c,
            policy,
            now=now,
            novelty_age=ages.get(c.document.event_id),
            prefer_observations=prefer_observations,
            weights=weights,
        )
        for c in candidates
    ]
    return sorted(
        scored, key=lambda s: (-s.final, -s.candidate.fused, s.candidate.document.event_id)
    )


def procedure_version(tags: Sequence[str]) -> tuple[str, int] | None:
    """(procedure id, version) from a procedure memory's tags, if it has them."""
    pid = next(
        (t.removeprefix(PROCEDURE_TAG_PREFIX) for t in tags if t.startswith(PROCEDURE_TAG_PREFIX)),
        None,
    )
    version = next(
        (t.removeprefix(VERSION_TAG_PREFIX) for t in tags if t.startswith(VERSION_TAG_PREFIX)), None
    )
    if pid is None or version is None or not version.isdigit():
        return None
    return pid, int(version)


def _tag_value(tags: Sequence[str], prefix: str) -> str | None:
    return next((t.removeprefix(prefix) for t in tags if t.startswith(prefix)), None)


def newest_versions(ranked: Sequence[Scored], newest: Mapping[str, int]) -> list[Scored]:
    """Drop procedure versions older than the newest known version of their procedure."""
    kept = []
    for item in ranked:
        found = procedure_version(item.candidate.document.tags)
        if found is None or found[1] >= newest.get(found[0], found[1]):
            kept.append(item)
    return kept


def estimate_tokens(text: str) -> int:
    """A model-free token estimate: about four characters per token, at least one."""
    return max(1, math.ceil(len(text) / 4))


@dataclass
class Budget:
    """Fills results top-down until ``max_tokens`` would be exceeded."""

    max_tokens: int | None
    used: int = 0

    def admit(self, tokens: int) -> bool:
        if self.max_tokens is not None and self.used + tokens > self.max_tokens:
            return False
        self.used += tokens
        return True
