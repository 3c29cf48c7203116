"""Reranking as recall uses it: bounded in candidates and time, and never a failure.

A cross-encoder costs per candidate and lives behind a network, so recall hands it
at most ``max_candidates`` texts and waits at most ``deadline_s`` in all (retries
included). Whatever goes wrong (an outage, throttling, a timeout, an answer in no
known shape) leaves the ranking as it was, with a warning; after a failure the
reranker rests for ``rest_s`` so that a dead or slow endpoint costs one recall its
deadline, not every recall.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import structlog

from cogsub.core.errors import CogsubError, ConfigurationError
from cogsub.rerank.blend import Blended, blend, normalised
from cogsub.rerank.ports import Reranker

__all__ = ["Reranking"]

_log = structlog.get_logger(__name__)


class Reranking:
    """The reranking step of recall around one :class:`Reranker`.

    Args:
        reranker: Scores the head of the ranking; closed by ``close``.
        weight: ``w`` of the blend ``(1 − w) · final + w · rerank`` (see
            :mod:`cogsub.rerank.blend`).
        max_candidates: How many of the best-ranked candidates are sent at most.
        deadline_s: The whole call's budget, retries included.
        rest_s: How long reranking is skipped after a failure.
        clock: Monotonic seconds (injectable for tests).
    """

    def __init__(
        self,
        reranker: Reranker,
        *,
        weight: float = 0.5,
        max_candidates: int = 50,
        deadline_s: float = 1.0,
        rest_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0.0 <= weight <= 1.0:
            raise ConfigurationError(f"rerank weight must be within [0, 1], got {weight}")
        if max_candidates < 1 or deadline_s <= 0 or rest_s < 0:
            raise ConfigurationError("max_candidates must be >= 1, deadline_s > 0, rest_s >= 0")
        self._reranker = reranker
        self.weight = weight
        self.max_candidates = max_candidates
        self._deadline_s = deadline_s
        self._rest_s = rest_s
        self._clock = clock
        self._resting_until = float("-inf")

    async def blended(
        self, query: str, finals: Sequence[float], texts: Sequence[str]
    ) -> list[Blended] | None:
        """The candidates in blended order, or None to keep the ranking as it is.

        Args:
            query: What recall was asked.
            finals: The ranking's scores, best first.
            texts: The texts of the first candidates (at most ``max_candidates`` are sent).
        """
        head = list(texts[: min(self.max_candidates, len(finals))])
        if not head or self._clock() < self._resting_until:
            return None
        scores = await self._scores(query, head)
        if not scores:
            return None
        return blend(finals, normalised(scores), self.weight)

    async def _scores(self, query: str, texts: list[str]) -> list[float] | None:
        started = self._clock()
        try:
            async with asyncio.timeout(self._deadline_s):
                scores = await self._reranker.rerank(query, texts)
            if scores and len(scores) != len(texts):
                raise ConfigurationError(f"{len(scores)} rerank scores for {len(texts)} texts")
        except (CogsubError, TimeoutError) as exc:
            self._resting_until = self._clock() + self._rest_s
            _log.warning(
                "recall_rerank_skipped",
                reranker=self._reranker.name,
                reason=str(exc) or type(exc).__name__,
                elapsed_s=round(self._clock() - started, 3),
                resting_s=self._rest_s,
            )
            return None
        return scores

    async def close(self) -> None:
        """Close the reranker."""
        await self._reranker.close()
