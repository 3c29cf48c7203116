"""Pure recall ranking: fused relevance, then policy-weighted scoring.

Nothing here does I/O, so every rule is tested exhaustively without servers.
``docs/ranking.md`` states the formulas; :mod:`cogsub.recall.fusion` turns the
BM25 and vector candidates into one relevance value per memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import overload

import numpy as np
import numpy.typing as npt

from cogsub.core.documents import IndexDocument
from cogsub.core.events import FactType
from cogsub.core.memory import PROCEDURE_TAG_PREFIX, VERSION_TAG_PREFIX, ScoreBreakdown
from cogsub.recall.context import document_us, epoch_us, instant
from cogsub.recall.fusion import Candidate, Pool, contextual_fuse, contextual_pool, fuse
from cogsub.recall.policy import RRF_K, RankingPolicy

__all__ = [
    "RRF_K",
    "Budget",
    "Candidate",
    "Pool",
    "Ranking",
    "Scored",
    "contextual_fuse",
    "contextual_pool",
    "count_bonus",
    "diversified",
    "estimate_tokens",
    "fuse",
    "near_duplicates_last",
    "is_current_version",
    "newest_versions",
    "novelty",
    "procedure_version",
    "rank",
    "rank_pool",
    "recency",
    "score",
    "session_lifted",
]


def recency(timestamp: str, now: datetime, *, half_life_days: float) -> float:
    """1 for now, halving every ``half_life_days`` into the past; future times count as now."""
    then = instant(timestamp)
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


@dataclass(eq=False)  # not frozen: a frozen init was a third of ranking ~230 candidates
class Scored:
    """A candidate, its signals and the weighted sum of them (``final``); never changed."""

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
    """Candidates best first by final score (ties by fused relevance, then id).

    With ``policy.session_lift`` the relevances are first lifted by their sessions
    (:func:`session_lifted`); with ``policy.session_diversity`` the head is then
    reordered across sessions (:func:`diversified`).
    """
    if policy.session_lift > 0.0:
        candidates = session_lifted(candidates, policy.session_lift)
    docs = [c.document for c in candidates]
    fused = [c.fused for c in candidates]
    ages = novelty_ages or {}
    columns, finals, order = _ranked_rows(docs, fused, policy, now, ages, prefer_observations)
    weights = policy.weights()
    ordered = [Scored(candidates[r], _SignalRow(columns, r), weights, finals[r]) for r in order]
    if policy.session_diversity > 0.0:
        return diversified(ordered, policy.session_diversity, depth=policy.diversify_depth)
    return ordered


def rank_pool(
    pool: Pool,
    policy: RankingPolicy,
    *,
    now: datetime,
    novelty_ages: Mapping[str, int] | None = None,
    prefer_observations: bool = False,
) -> Ranking:
    """:func:`rank` on fusion's columns: the same order, a ``Scored`` built only when read.

    Then, for a list question (``pool.listing``), the head is spread across sessions
    and near-duplicates as ``policy.list_diversity`` and ``list_duplicate_cosine`` say.
    """
    if policy.session_lift > 0.0:
        sessions = [d.session_id for d in pool.documents]
        pool.fused = _lifted(pool.fused, sessions, policy.session_lift)
    ages = novelty_ages or {}
    times_us = None if pool.traits is None else [t.epoch_us for t in pool.traits]
    columns, finals, order = _ranked_rows(
        pool.documents, pool.fused, policy, now, ages, prefer_observations, times_us
    )
    ranking = Ranking(pool, columns, policy.weights(), finals, order)
    if policy.session_diversity > 0.0:
        ranking.diversify(policy.session_diversity, depth=policy.diversify_depth)
    if pool.listing:
        _spread_list_answers(ranking, pool, policy)
    return ranking


def _spread_list_answers(ranking: Ranking, pool: Pool, policy: RankingPolicy) -> None:
    """A list question's head reordered so each item of the answer gets a place.

    The head of a list question fills with turns about its best item; the other
    items' turns are elsewhere, often in other sessions (``policy.list_*``).
    """
    depth = policy.diversify_depth
    if policy.list_diversity > 0.0:
        ranking.diversify(policy.list_diversity, depth=depth)
    vectors, threshold = pool.vectors, policy.list_duplicate_cosine
    if threshold > 0.0 and vectors is not None:
        ranking.reorder_head(depth, lambda head: near_duplicates_last(head, vectors, threshold))


def near_duplicates_last(
    rows: Sequence[int], vectors: npt.NDArray[np.float64], threshold: float
) -> list[int]:
    """``rows`` in order, but each whose vector has cosine ≥ ``threshold`` with a kept row
    above it moved after the kept ones (the moved keep their order).

    ``vectors`` holds unit rows, indexed by row. The turns saying the same thing as a
    better one add nothing to a list question's answer; a turn about another item does.
    """
    kept: list[int] = []
    moved: list[int] = []
    for row in rows:
        if kept and float(np.max(vectors[kept] @ vectors[row])) >= threshold:
            moved.append(row)
        else:
            kept.append(row)
    return kept + moved


class Ranking(Sequence[Scored]):
    """A recall's candidates best first, each ``Scored`` built when first read.

    A recall ranks ~230 rows and reads ~10 of them: the order is computed on arrays
    (:func:`_ranked_rows`), the records only for the rows read.
    """

    def __init__(
        self,
        pool: Pool,
        columns: Mapping[str, Sequence[float]],
        weights: Mapping[str, float],
        finals: Sequence[float],
        order: list[int],
    ) -> None:
        self._pool = pool
        self._columns = columns
        self._weights = weights
        self._finals = finals
        self._order = order
        self._built: dict[int, Scored] = {}

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, place: int) -> Scored: ...

    @overload
    def __getitem__(self, place: slice) -> list[Scored]: ...

    def __getitem__(self, place: int | slice) -> Scored | list[Scored]:
        if isinstance(place, slice):
            return [self._scored(row) for row in self._order[place]]
        return self._scored(self._order[place])

    def __iter__(self) -> Iterator[Scored]:
        return (self._scored(row) for row in self._order)

    def kept(self, keep: Callable[[IndexDocument], bool]) -> Iterator[Scored]:
        """The ranking without the rows whose document ``keep`` refuses, asked as read."""
        documents = self._pool.documents
        return (self._scored(row) for row in self._order if keep(documents[row]))

    def diversify(self, diversity: float, *, depth: int) -> None:
        """Reorder the head as :func:`diversified` does."""
        head = diversified(self[:depth], diversity, depth=depth)
        row_of = {id(self._built[row]): row for row in self._order[:depth]}
        self._order[:depth] = [row_of[id(item)] for item in head]

    def reorder_head(self, depth: int, reordered: Callable[[list[int]], list[int]]) -> None:
        """The first ``depth`` rows put in the order ``reordered`` gives them (the same rows)."""
        head = reordered(self._order[:depth])
        if sorted(head) != sorted(self._order[:depth]):
            raise ValueError("reorder_head: the reordered head must hold the same rows")
        self._order[:depth] = head

    def _scored(self, row: int) -> Scored:
        built = self._built.get(row)
        if built is None:
            candidate = self._pool.candidate(row)
            signals = _SignalRow(self._columns, row)
            built = Scored(candidate, signals, self._weights, self._finals[row])
            self._built[row] = built
        return built


def _ranked_rows(
    docs: Sequence[IndexDocument],
    fused: Sequence[float],
    policy: RankingPolicy,
    now: datetime,
    ages: Mapping[str, int],
    prefer_observations: bool,
    times_us: Sequence[int] | None = None,
) -> tuple[dict[str, list[float]], list[float], list[int]]:
    """(signal columns, final scores, rows best first: final, then fused, then id, descending).

    One stable sort on three keys at once: the ids' places in id order break the last ties.
    """
    columns = _signal_columns(docs, fused, policy, now, ages, prefer_observations, times_us)
    finals = _weighted_sums(columns, policy.weights())
    ids = [d.event_id for d in docs]
    id_place = np.empty(len(ids), dtype=np.intp)
    id_place[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
    keys = (id_place, -np.asarray(fused, dtype=np.float64), -np.asarray(finals, dtype=np.float64))
    order: list[int] = np.lexsort(keys).tolist()
    return columns, finals, order


def _signal_columns(
    docs: Sequence[IndexDocument],
    fused: Sequence[float],
    policy: RankingPolicy,
    now: datetime,
    ages: Mapping[str, int],
    prefer_observations: bool,
    times_us: Sequence[int] | None = None,
) -> dict[str, list[float]]:
    """Each signal of :func:`score` for every candidate, a column per signal in its order.

    A column at a time, not a dict and a sum per candidate: a recall ranks ~230
    candidates, and that per-candidate overhead was most of ranking's time.
    """
    half_life, decay = policy.recency_half_life_days, policy.novelty_decay
    observation = FactType.OBSERVATION
    return {
        "relevance": list(fused),
        "importance": [d.importance_score * d.decay_factor for d in docs],
        "recency": _recency_column(docs, now, half_life, times_us),
        "reward": [d.reward_score for d in docs],
        "novelty": [
            1.0 if (age := ages.get(d.event_id)) is None else novelty(age, decay=decay)
            for d in docs
        ],
        "reinforcement": [count_bonus(d.retrieval_count) for d in docs],
        "type_boost": [
            1.0 if prefer_observations and d.fact_type is observation else 0.0 for d in docs
        ],
    }


def _recency_column(
    docs: Sequence[IndexDocument],
    now: datetime,
    half_life_days: float,
    times_us: Sequence[int] | None = None,
) -> list[float]:
    """:func:`recency` of each document, to the bit, from its time in whole microseconds.

    ``(now - then).total_seconds()`` is the microseconds between them divided by 10**6
    as integers, which is what this divides; no datetime is made per document.
    ``times_us`` are those microseconds when the caller has read them already.
    """
    now_us, factor = epoch_us(now), -math.log(2)
    at = list(map(document_us, docs)) if times_us is None else times_us
    return [
        math.exp(factor * max(0.0, (now_us - then_us) / 1_000_000 / 86_400) / half_life_days)
        for then_us in at
    ]


class _SignalRow(Mapping[str, float]):
    """One candidate's signals, read from the ranking's columns when asked.

    Only the few candidates a recall returns are ever asked (for their breakdown); a
    dict per candidate was a third of ranking's time.
    """

    __slots__ = ("_columns", "_row")

    def __init__(self, columns: Mapping[str, Sequence[float]], row: int) -> None:
        self._columns = columns
        self._row = row

    def __getitem__(self, name: str) -> float:
        return self._columns[name][self._row]

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)


def _weighted_sums(columns: Mapping[str, list[float]], weights: Mapping[str, float]) -> list[float]:
    """Σ weight × signal per row, added in the columns' order as :func:`score` adds them.

    float64 array arithmetic rounds each product and sum as Python's floats do, so
    every total is the same to the bit.
    """
    total = np.zeros(len(next(iter(columns.values()), [])), dtype=np.float64)
    for name, values in columns.items():
        total = total + weights[name] * np.asarray(values, dtype=np.float64)
    return list(total.tolist())


def session_lifted(candidates: Sequence[Candidate], lift: float) -> list[Candidate]:
    """Each candidate's relevance plus ``lift`` × the best relevance of another in its session.

    A conversation comes back to a topic within a session, so the turns beside
    a strong hit's session are likelier answers than equally scored strangers.
    Relevances are rescaled so the best is 1 again; the candidates are updated in place.
    """
    sessions = [c.document.session_id for c in candidates]
    lifted = _lifted([c.fused for c in candidates], sessions, lift)
    for c, value in zip(candidates, lifted, strict=True):
        c.fused = value
    return list(candidates)


def _lifted(fused: Sequence[float], sessions: Sequence[str | None], lift: float) -> list[float]:
    """:func:`session_lifted`'s relevances, one per row."""
    best: dict[str, list[float]] = {}  # session → its two best relevances
    for value, session in zip(fused, sessions, strict=True):
        if session is not None:
            top = best.setdefault(session, [])
            top.append(value)
            top.sort(reverse=True)
            del top[2:]
    lifted = [
        value + lift * _best_other(best.get(session or "", []), value)
        for value, session in zip(fused, sessions, strict=True)
    ]
    high = max(lifted, default=0.0)
    return [value / high if high > 0.0 else 0.0 for value in lifted]


def _best_other(top: Sequence[float], own: float) -> float:
    """The best of a session's two best relevances that is not ``own`` (0 when none)."""
    if not top:
        return 0.0
    if own >= top[0]:
        return top[1] if len(top) > 1 else 0.0
    return top[0]


def diversified(ranked: Sequence[Scored], diversity: float, *, depth: int) -> list[Scored]:
    """The first ``depth`` of ``ranked`` reordered so no session fills the head alone.

    Greedy: each next place goes to the candidate with the best ``final`` ×
    (1 − diversity)^(how many of its session are already placed). Questions
    whose evidence spans sessions (multi-hop) then get a slot for each. The
    scores are kept as they were; only the order changes.
    """
    head, tail = list(ranked[:depth]), list(ranked[depth:])
    placed: dict[str, int] = {}

    def damped(item: Scored) -> float:
        session = item.candidate.document.session_id
        already = placed.get(session, 0) if session is not None else 0
        return item.final * (1.0 - diversity) ** already

    out: list[Scored] = []
    while head:
        item = head.pop(max(range(len(head)), key=lambda i: (damped(head[i]), -i)))
        if (session := item.candidate.document.session_id) is not None:
            placed[session] = placed.get(session, 0) + 1
        out.append(item)
    return out + tail


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
    if not newest:  # no procedure among the candidates: nothing to drop, nothing to read
        return list(ranked)
    kept = []
    for item in ranked:
        found = procedure_version(item.candidate.document.tags)
        if found is None or found[1] >= newest.get(found[0], found[1]):
            kept.append(item)
    return kept


def is_current_version(document: IndexDocument, newest: Mapping[str, int]) -> bool:
    """False for a procedure version older than ``newest`` knows (as ``newest_versions``)."""
    if not newest:
        return True
    found = procedure_version(document.tags)
    return found is None or found[1] >= newest.get(found[0], found[1])


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
