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

from cogsub.core.events import FactType
from cogsub.core.memory import PROCEDURE_TAG_PREFIX, VERSION_TAG_PREFIX, ScoreBreakdown
from cogsub.recall.fusion import Candidate, contextual_fuse, fuse
from cogsub.recall.policy import RRF_K, RankingPolicy

__all__ = [
    "RRF_K",
    "Budget",
    "Candidate",
    "RankingPolicy",  # re-exported: benchmarks import it from here
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
