"""Fusion of BM25 and vector candidates into one relevance value per memory (pure).

Two fusions, chosen by ``RankingPolicy.fusion``:

- ``rrf``: reciprocal-rank fusion of the two ranked lists (:func:`fuse`);
- ``contextual`` (the default, :func:`contextual_fuse`): scores, not ranks, over
  the union of both pools and the turns around their best hits. BM25 is scaled
  by the pool's best, then each turn of a conversation also receives part of
  its neighbours' BM25 (the turn before it most, fully when that turn asked a
  question: the answer follows it; a smaller part from two turns away). The
  cosine is taken between the query and the turn's embedding mixed with its
  neighbours', then scaled so the pool's median is 0 and its best 1. Their
  weighted sum is multiplied by the query's cues (a named speaker, a "when"
  question, a date: :mod:`cogsub.recall.query`) and scaled so the best is 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from cogsub.core.documents import IndexDocument
from cogsub.index.ports import Embeddings, Hit
from cogsub.recall.context import Links, instant, neighbour_links
from cogsub.recall.policy import RRF_K, RankingPolicy
from cogsub.recall.query import QueryAnalysis
from cogsub.recall.traits import Traits, traits_of

_FloatArray = npt.NDArray[np.float64]


@dataclass
class Candidate:
    """One document with where each retriever ranked it (1-based) and its raw scores."""

    document: IndexDocument
    bm25_rank: int | None = None
    vector_rank: int | None = None
    bm25_score: float | None = None
    cosine: float | None = None
    fused: float = 0.0
    lexical: float | None = None
    semantic: float | None = None
    context: float | None = None
    boost: float | None = None


@dataclass
class Pool:
    """One recall's candidates as columns, a row per memory: what fusion hands to ranking.

    A recall pools ~230 memories and returns ~10, so a :class:`Candidate` is built only
    for a row that is asked for (:meth:`candidate`); ranking reads the columns. Rows are
    in pooling order (text hits, vector hits, then neighbours), not ranked.
    """

    documents: list[IndexDocument]
    bm25_rank: list[int | None]
    vector_rank: list[int | None]
    bm25_score: list[float | None]
    cosine: list[float | None]
    fused: list[float]
    lexical: list[float] | None = None
    semantic: list[float] | None = None
    context: list[float] | None = None
    boost: list[float] | None = None
    #: The cosine fusion measured for each row (NaN where it had no vector to measure).
    measured: list[float] | None = None
    #: Each row's document's traits, when fusion has read them.
    traits: list[Traits] | None = None
    #: Each row's unit embedding, when fusion had them (ranking's near-duplicate test).
    vectors: _FloatArray | None = None
    #: The query asks for several things of a kind (``QueryAnalysis.listing``).
    listing: bool = False

    def __len__(self) -> int:
        return len(self.documents)

    @classmethod
    def of(cls, candidates: Sequence[Candidate]) -> Pool:
        """The pool of ready-made candidates (reciprocal-rank fusion, tests)."""
        pool = cls([], [], [], [], [], [])
        for c in candidates:
            pool.documents.append(c.document)
            pool.bm25_rank.append(c.bm25_rank)
            pool.vector_rank.append(c.vector_rank)
            pool.bm25_score.append(c.bm25_score)
            pool.cosine.append(c.cosine)
            pool.fused.append(c.fused)
        for name in ("lexical", "semantic", "context", "boost"):
            values = [getattr(c, name) for c in candidates]
            if candidates and all(v is not None for v in values):
                setattr(pool, name, values)
        return pool

    def candidate(self, row: int) -> Candidate:
        """Row ``row`` as a :class:`Candidate` (a new object each time)."""
        cosine = self.cosine[row]
        if cosine is None and self.measured is not None and not math.isnan(self.measured[row]):
            cosine = self.measured[row]
        return Candidate(
            self.documents[row],
            bm25_rank=self.bm25_rank[row],
            vector_rank=self.vector_rank[row],
            bm25_score=self.bm25_score[row],
            cosine=cosine,
            fused=self.fused[row],
            lexical=_at(self.lexical, row),
            semantic=_at(self.semantic, row),
            context=_at(self.context, row),
            boost=_at(self.boost, row),
        )

    def candidates(self) -> list[Candidate]:
        """Every row as a candidate, best fused first, ties by id."""
        every = [self.candidate(row) for row in range(len(self))]
        return sorted(every, key=lambda c: (-c.fused, c.document.event_id))


def _at(column: list[float] | None, row: int) -> float | None:
    return None if column is None else column[row]


def _pooled(
    text_hits: Sequence[Hit],
    vector_hits: Sequence[Hit],
    neighbours: Sequence[IndexDocument] = (),
) -> Pool:
    """The union of both pools, each row with its ranks and raw scores (fused 0 for now).

    ``neighbours`` (turns around the hits that neither search returned) join
    without ranks or scores: they are ranked by their context and their cosine.
    """
    documents: dict[str, IndexDocument] = {}
    for hit in text_hits:
        documents.setdefault(hit.document.event_id, hit.document)
    for hit in vector_hits:
        documents.setdefault(hit.document.event_id, hit.document)
    for document in neighbours:
        documents.setdefault(document.event_id, document)
    # A later hit of the same memory overrides an earlier one, as assignment in turn would.
    text = {h.document.event_id: (rank, h.score) for rank, h in enumerate(text_hits, start=1)}
    vector = {h.document.event_id: (rank, h.score) for rank, h in enumerate(vector_hits, start=1)}
    absent = (None, None)
    bm25 = [text.get(event_id, absent) for event_id in documents]
    cosine = [vector.get(event_id, absent) for event_id in documents]
    return Pool(
        documents=list(documents.values()),
        bm25_rank=[rank for rank, _ in bm25],
        vector_rank=[rank for rank, _ in cosine],
        bm25_score=[score for _, score in bm25],
        cosine=[score for _, score in cosine],
        fused=[0.0] * len(documents),
    )


def fuse(
    text_hits: Sequence[Hit], vector_hits: Sequence[Hit], *, k: int = RRF_K
) -> list[Candidate]:
    """Reciprocal-rank fusion; ``fused`` is normalised so a doc ranked first by both is 1."""
    pool = _pooled(text_hits, vector_hits)
    best = 2.0 / (k + 1)
    for row, ranks in enumerate(zip(pool.bm25_rank, pool.vector_rank, strict=True)):
        total = sum(1.0 / (k + r) for r in ranks if r is not None)
        pool.fused[row] = total / best
    return pool.candidates()


def contextual_fuse(
    text_hits: Sequence[Hit],
    vector_hits: Sequence[Hit],
    *,
    query_vector: Sequence[float],
    analysis: QueryAnalysis,
    policy: RankingPolicy,
    neighbours: Sequence[IndexDocument] = (),
    embeddings: Embeddings | None = None,
    content_vector: Sequence[float] | None = None,
) -> list[Candidate]:
    """:func:`contextual_pool`'s rows as candidates, best first, ties by id."""
    pool = contextual_pool(
        text_hits,
        vector_hits,
        query_vector=query_vector,
        analysis=analysis,
        policy=policy,
        neighbours=neighbours,
        embeddings=embeddings,
        content_vector=content_vector,
    )
    return pool.candidates()


def contextual_pool(
    text_hits: Sequence[Hit],
    vector_hits: Sequence[Hit],
    *,
    query_vector: Sequence[float],
    analysis: QueryAnalysis,
    policy: RankingPolicy,
    neighbours: Sequence[IndexDocument] = (),
    embeddings: Embeddings | None = None,
    content_vector: Sequence[float] | None = None,
) -> Pool:
    """Score-level fusion with conversational context and query cues (module docstring).

    ``neighbours`` are documents around the hits (``MemoryIndex.neighbours``)
    that neither search returned. ``embeddings`` holds the candidates' vectors
    when their documents come without (``MemoryIndex.recall_candidates``).
    ``content_vector`` (the question's content embedded) scores the semantic arm
    beside ``query_vector`` as ``policy.content_vector`` says; ignored when "off".
    ``fused`` is in (0, 1], 1 for the best row; ``lexical``, ``semantic``,
    ``context`` and ``boost`` say where it came from.
    """
    pool = _pooled(text_hits, vector_hits, neighbours)
    if not pool.documents:
        return pool
    docs = pool.documents
    pool.traits = traits = [traits_of(d) for d in docs]
    times = [t.epoch_s for t in traits]
    links = neighbour_links(docs, max_gap_s=policy.neighbour_gap_s, times=times)
    bm25 = np.array([max(0.0, s or 0.0) for s in pool.bm25_score], dtype=np.float64)
    lexical, context = _lexical(bm25, docs, links, policy)
    arm = _semantic_arm(_vectors_of(docs, embeddings), query_vector, links, policy)
    cosine, semantic = _semantic_of(arm, pool.cosine, _second_query(content_vector, policy))
    boost = _boosts(docs, traits, analysis, policy)
    fused = _weighted(lexical, semantic, boost, policy)
    if arm is not None and policy.feedback_weight > 0.0:
        semantic = arm.relevance(_fed_back(arm, fused, policy))
        fused = _weighted(lexical, semantic, boost, policy)
    best = float(fused.max())
    # Whole columns to Python floats at once: an element at a time was a tenth of fusion.
    pool.fused = (fused / best).tolist() if best > 0.0 else [0.0] * len(docs)
    pool.lexical, pool.semantic = lexical.tolist(), semantic.tolist()
    pool.context, pool.boost, pool.measured = context.tolist(), boost.tolist(), cosine.tolist()
    pool.vectors, pool.listing = (None if arm is None else arm.vectors), analysis.listing
    return pool


def _scaled_to_best(values: _FloatArray) -> _FloatArray:
    best = float(values.max()) if values.size else 0.0
    return values / best if best > 0.0 else np.zeros_like(values)


def _lexical(
    bm25: _FloatArray, docs: Sequence[IndexDocument], links: Links, policy: RankingPolicy
) -> tuple[_FloatArray, _FloatArray]:
    """BM25 scaled to the best, plus the neighbours' shares; then scaled again. (total, context).

    A turn receives ``context_before`` of the turn before's BM25 (``context_before_question``
    when that turn asked a question), ``context_second`` of that share from two turns before,
    and the same from the turns after with ``context_after``. As array operations, adding
    each share in that order (an absent one adds 0.0, which changes no sum of non-negatives).
    """
    own = _scaled_to_best(bm25)
    before, further_before = _linked(links.before_at)
    after, further_after = _linked(links.after_at)
    asked = np.array(["?" in doc.summary for doc in docs], dtype=np.bool_)
    before_share = np.where(
        asked[before.index], policy.context_before_question, policy.context_before
    )
    second = policy.context_second
    context = np.zeros_like(own)
    context = context + before.taken(before_share * own[before.index])
    context = context + further_before.taken(
        second * policy.context_before * own[further_before.index]
    )
    context = context + after.taken(policy.context_after * own[after.index])
    context = context + further_after.taken(
        second * policy.context_after * own[further_after.index]
    )
    total = own + context
    best = float(total.max())
    if best <= 0.0:
        return total, context
    return total / best, context / best


@dataclass(frozen=True)
class _Link:
    """For each candidate, the position of a linked one (``index``; 0 where ``present`` is not)."""

    index: npt.NDArray[np.intp]
    present: npt.NDArray[np.bool_]

    def taken(self, values: _FloatArray) -> _FloatArray:
        """``values`` where the link is present, 0.0 elsewhere."""
        return np.where(self.present, values, 0.0)


def _linked(side: npt.NDArray[np.intp]) -> tuple[_Link, _Link]:
    """Each candidate's neighbour on ``side`` (-1: none), and that neighbour's own."""
    present = side >= 0
    index = np.where(present, side, 0)
    second = np.where(present, side[index] if side.size else -1, -1)
    second_present = second >= 0
    return _Link(index, present), _Link(np.where(second_present, second, 0), second_present)


def _vectors_of(
    docs: Sequence[IndexDocument], embeddings: Embeddings | None
) -> npt.NDArray[np.floating] | None:
    """The documents' vectors as matrix rows, from ``embeddings`` or from the documents."""
    if embeddings is not None:
        rows = embeddings.rows_of([d.event_id for d in docs])
        if rows is not None:
            return rows
    width = len(docs[0].embedding)
    if width == 0 or any(len(d.embedding) != width for d in docs):
        return None
    return np.asarray([d.embedding for d in docs], dtype=np.float64)


def _weighted(
    lexical: _FloatArray, semantic: _FloatArray, boost: _FloatArray, policy: RankingPolicy
) -> _FloatArray:
    """Relevance before scaling: the weighted sum of both arms, times the query's cues."""
    return (policy.lexical_weight * lexical + policy.semantic_weight * semantic) * boost


@dataclass(frozen=True)
class _SemanticArm:
    """The pool's unit vectors, and each mixed with its neighbours' (unit rows), for one query."""

    query: _FloatArray  # unit
    vectors: _FloatArray
    mixed: _FloatArray

    def relevance(self, query: _FloatArray) -> _FloatArray:
        """The contextual cosine to ``query`` (a unit vector), the median 0 and the best 1."""
        return _median_to_best(self.mixed @ query)

    def relevance_to_both(self, second: _SecondQuery) -> _FloatArray:
        """Each row's max or mean of its contextual cosines to both queries, then scaled."""
        first = self.mixed @ self.query
        other = self.mixed @ _unit(np.asarray(second.vector, dtype=np.float64))
        if second.how == "max":
            return _median_to_best(np.maximum(first, other))
        return _median_to_best((1.0 - second.weight) * first + second.weight * other)


@dataclass(frozen=True)
class _SecondQuery:
    """A second query vector for the semantic arm, and how its cosine joins the first's."""

    vector: Sequence[float]
    how: Literal["max", "mean"]
    weight: float  # the second cosine's share of "mean"


def _second_query(vector: Sequence[float] | None, policy: RankingPolicy) -> _SecondQuery | None:
    if vector is None or policy.content_vector == "off":
        return None
    return _SecondQuery(vector, policy.content_vector, policy.content_weight)


def _unit(vector: _FloatArray) -> _FloatArray:
    return vector / (float(np.linalg.norm(vector)) or 1.0)


def _semantic_arm(
    matrix: npt.NDArray[np.floating] | None,
    query_vector: Sequence[float],
    links: Links,
    policy: RankingPolicy,
) -> _SemanticArm | None:
    """The arm over ``matrix``'s rows, or None when they are missing or not the query's width."""
    query = np.asarray(query_vector, dtype=np.float64)
    dimension = query.shape[0] if query.ndim == 1 else -1
    if matrix is None or matrix.shape[1] != dimension:
        return None
    vectors = _unit_rows(matrix.astype(np.float64))
    query = query / (float(np.linalg.norm(query)) or 1.0)
    mixed = vectors.copy()
    # Each side as one array operation (a row at a time was most of fusion's time); the
    # turn before is added first, as it always was, so every sum is the same to the bit.
    for side in (links.before_at, links.after_at):
        rows = np.flatnonzero(side >= 0)
        if rows.size:
            mixed[rows] += policy.vector_context * vectors[side[rows]]
    return _SemanticArm(query, vectors, _unit_rows(mixed))


def _semantic_of(
    arm: _SemanticArm | None,
    engine_scores: Sequence[float | None],
    second: _SecondQuery | None = None,
) -> tuple[_FloatArray, _FloatArray]:
    """(raw cosine or NaN, contextual cosine scaled so the pool's median is 0 and its best is 1).

    Without an arm (no usable embeddings) the vector engine's own scores stand in, where it
    returned the document, without context. With a ``second`` query of the arm's width, the
    contextual cosine is the max or mean of both; the raw cosine stays the first query's.
    """
    if arm is None:
        raw = np.array([s if s is not None else np.nan for s in engine_scores], dtype=np.float64)
        floor = float(np.nanmin(raw)) if not np.isnan(raw).all() else 0.0
        return raw, _median_to_best(np.nan_to_num(raw, nan=floor))
    if second is not None and len(second.vector) == arm.query.shape[0]:
        return arm.vectors @ arm.query, arm.relevance_to_both(second)
    return arm.vectors @ arm.query, arm.relevance(arm.query)


def _semantic(
    matrix: npt.NDArray[np.floating] | None,
    query_vector: Sequence[float],
    links: Links,
    policy: RankingPolicy,
    *,
    engine_scores: Sequence[float | None],
    content_vector: Sequence[float] | None = None,
) -> tuple[_FloatArray, _FloatArray]:
    """:func:`_semantic_of` the arm over ``matrix`` (the semantic column of one pool)."""
    arm = _semantic_arm(matrix, query_vector, links, policy)
    return _semantic_of(arm, engine_scores, _second_query(content_vector, policy))


def _fed_back(arm: _SemanticArm, fused: _FloatArray, policy: RankingPolicy) -> _FloatArray:
    """The query moved toward the ``feedback_depth`` best-fused rows (Rocchio, no negatives).

    ``unit(q + feedback_weight · mean(top rows))``, the rows being the plain unit vectors or,
    with ``feedback_context``, the neighbour-mixed ones. The best hits of both arms together
    say what the answer's turns look like, which the question's own words may not.
    """
    depth = min(policy.feedback_depth, fused.shape[0])
    # Stable: equal relevance keeps pooling order, so the same pool always moves the same way.
    top = np.argsort(-fused, kind="stable")[:depth]
    rows = arm.mixed if policy.feedback_context else arm.vectors
    moved: _FloatArray = arm.query + policy.feedback_weight * rows[top].mean(axis=0)
    return moved / (float(np.linalg.norm(moved)) or 1.0)


def _median_to_best(values: _FloatArray) -> _FloatArray:
    """``values`` mapped so the median is 0 (and below it too) and the best is 1."""
    low, high = float(np.median(values)), float(values.max())
    if high - low <= 1e-12:
        return np.ones_like(values)
    return np.clip((values - low) / (high - low), 0.0, None)


def _unit_rows(matrix: _FloatArray) -> _FloatArray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0.0, norms, 1.0)


def _boosts(
    docs: Sequence[IndexDocument],
    traits: Sequence[Traits],
    analysis: QueryAnalysis,
    policy: RankingPolicy,
) -> _FloatArray:
    """The product of the query cues each document matches (1 when it matches none)."""
    boost = np.ones(len(docs), dtype=np.float64)
    # Each cue reads the documents only when the query carries it (most carry one or none).
    speakers = [t.speaker for t in traits] if analysis.names else []
    named = analysis.names & {s for s in speakers if s is not None}
    # Only one named speaker is a clear cue; "X and Y" questions are about both.
    if len(named) == 1:
        boost *= [1.0 + policy.speaker_boost if s in named else 1.0 for s in speakers]
    elif named and policy.subject_boost > 0.0:
        subject = next((name for name in analysis.subjects if name in named), None)
        if subject is not None:
            boost *= [1.0 + policy.subject_boost if s == subject else 1.0 for s in speakers]
    if analysis.temporal:
        says = [t.says_when(d) for t, d in zip(traits, docs, strict=True)]
        boost *= [1.0 + policy.temporal_boost if said else 1.0 for said in says]
    if analysis.dates:
        days = [instant(d.timestamp).date() for d in docs]
        boost *= [
            1.0 + policy.date_boost if any(span.contains(day) for span in analysis.dates) else 1.0
            for day in days
        ]
    return boost
