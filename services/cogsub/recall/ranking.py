"""Pure recall ranking: fusion of BM25 and vector candidates, then policy-weighted scoring.

Nothing here does I/O, so every rule is tested exhaustively without servers.
``docs/ranking.md`` states the formulas.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from cogsub.core.documents import IndexDocument
from cogsub.core.events import FactType
from cogsub.core.memory import PROCEDURE_TAG_PREFIX, VERSION_TAG_PREFIX, ScoreBreakdown
from cogsub.index.ports import Hit

RRF_K = 60


@dataclass(frozen=True)
class RankingPolicy:
    """Weights of each signal in the final score, and the shapes of the signals."""

    relevance: float = 0.80
    importance: float = 0.05
    recency: float = 0.05
    reward: float = 0.04
    novelty: float = 0.04
    reinforcement: float = 0.02  # the count bonus cb of cb · log2(1 + count)
    type_boost: float = 0.10  # applied to observations when prefer_observations is asked
    recency_half_life_days: float = 30.0
    novelty_decay: float = 0.5
    rrf_k: int = RRF_K

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


@dataclass
class Candidate:
    """One document with where each retriever ranked it (1-based) and its raw scores."""

    document: IndexDocument
    bm25_rank: int | None = None
    vector_rank: int | None = None
    bm25_score: float | None = None
    cosine: float | None = None
    fused: float = 0.0


def fuse(
    text_hits: Sequence[Hit], vector_hits: Sequence[Hit], *, k: int = RRF_K
) -> list[Candidate]:
    """Reciprocal-rank fusion; ``fused`` is normalised so a doc ranked first by both is 1."""
    by_id: dict[str, Candidate] = {}
    for rank, hit in enumerate(text_hits, start=1):
        item = by_id.setdefault(hit.document.event_id, Candidate(hit.document))
        item.bm25_rank, item.bm25_score = rank, hit.score
    for rank, hit in enumerate(vector_hits, start=1):
        item = by_id.setdefault(hit.document.event_id, Candidate(hit.document))
        item.vector_rank, item.cosine = rank, hit.score
    best = 2.0 / (k + 1)
    for item in by_id.values():
        total = sum(1.0 / (k + r) for r in (item.bm25_rank, item.vector_rank) if r is not None)
        item.fused = total / best
    return sorted(by_id.values(), key=lambda c: (-c.fused, c.document.event_id))


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
    candidate: Candidate
    breakdown: ScoreBreakdown

    @property
    def final(self) -> float:
        return self.breakdown.final


def score(
    candidate: Candidate,
    policy: RankingPolicy,
    *,
    now: datetime,
    novelty_age: int | None,
    prefer_observations: bool,
) -> Scored:
    """The policy-weighted score with every signal and weight in its breakdown."""
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
    weights = policy.weights()
    final = sum(weights[name] * value for name, value in signals.items())
    breakdown = ScoreBreakdown(
        **signals,
        weights=weights,
        final=final,
        bm25_rank=candidate.bm25_rank,
        vector_rank=candidate.vector_rank,
        bm25_score=candidate.bm25_score,
        cosine=candidate.cosine,
    )
    return Scored(candidate, breakdown)


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
    scored = [
        score(
            c,
            policy,
            now=now,
            novelty_age=ages.get(c.document.event_id),
            prefer_observations=prefer_observations,
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
