"""How recall weighs its signals: ``RankingPolicy``, plain data that fusion and ranking read.

It sits below both :mod:`cogsub.recall.fusion` and :mod:`cogsub.recall.ranking`
so that neither has to import the other for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

RRF_K = 60  # the usual reciprocal-rank-fusion constant


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
    # Several speakers named: the first one not owning something (``query.subjects``) is
    # boosted by this; 0 (off) was kept by leaving one LoCoMo conversation out (ranking.md).
    subject_boost: float = 0.0
    name_free_vector: bool = True  # embed the query without the names it contains
    # What the vector search embeds: the question as asked ("question") or only what it asks
    # about, its interrogative scaffolding removed ("content", ``query.question_content``).
    vector_query: Literal["question", "content"] = "question"
    # The semantic arm also scores the pool against the question's content and keeps each
    # row's "max" or "mean" of the two cosines ("off": the vector query's alone).
    content_vector: Literal["off", "max", "mean"] = "off"
    content_weight: float = 0.5  # the content cosine's share of "mean" (0.5: the plain mean)
    temporal_boost: float = 0.4  # a "when" question, and the memory says when
    date_boost: float = 0.3  # the query names the day or month the memory is from
    # A hit lifts the other candidates of its session by this share of its relevance.
    session_lift: float = 0.0
    # Each candidate already placed from a session scales the next one's score by (1 - this).
    session_diversity: float = 0.0
    diversify_depth: int = 20  # how far down the ranking the session diversity reorders
    # For list questions only (``query.asks_for_list``): the session diversity above, and
    # near-duplicates moved down: within the head a candidate whose embedding has at least
    # this cosine with one placed above it goes after the others (0: off). ``list_diversity``
    # 0.2 was chosen by leaving one LoCoMo dev conversation out (docs/ranking.md).
    list_diversity: float = 0.2
    list_duplicate_cosine: float = 0.0
    # Pseudo-relevance feedback on the semantic arm: the query vector moves this far toward
    # the mean of the ``feedback_depth`` best-fused candidates' vectors, and the pool is
    # fused again (0: off). ``feedback_context``: their neighbour-mixed vectors instead.
    feedback_weight: float = 0.0
    feedback_depth: int = 3
    feedback_context: bool = False

    def __post_init__(self) -> None:
        # NaN fails this too. An infinite weight made the semantic arm NaN and every relevance 0.
        if not 0.0 <= self.feedback_weight < math.inf:
            raise ValueError(
                f"feedback_weight must be at least 0 and finite, not {self.feedback_weight}"
            )
        if not 0.0 <= self.subject_boost < math.inf:
            raise ValueError(
                f"subject_boost must be at least 0 and finite, not {self.subject_boost}"
            )
        if self.feedback_depth < 1:
            raise ValueError(f"feedback_depth must be at least 1, not {self.feedback_depth}")
        if not 0.0 <= self.list_diversity < 1.0:
            raise ValueError(f"list_diversity must be in [0, 1), not {self.list_diversity}")
        if not 0.0 <= self.list_duplicate_cosine <= 1.0:
            raise ValueError(
                f"list_duplicate_cosine must be in [0, 1], not {self.list_duplicate_cosine}"
            )
        if self.vector_query not in ("question", "content"):
            raise ValueError(f"vector_query must be question or content, not {self.vector_query!r}")
        if self.content_vector not in ("off", "max", "mean"):
            raise ValueError(
                f"content_vector must be off, max or mean, not {self.content_vector!r}"
            )
        if not 0.0 <= self.content_weight <= 1.0:
            raise ValueError(f"content_weight must be within [0, 1], not {self.content_weight}")

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
