"""The Reranker port: a query and candidate texts in, one relevance score per text out.

Contract every adapter keeps:

- ``rerank`` returns one finite score per text, in the order of ``texts``; higher is
  more relevant. Scores in [0, 1] are read as probabilities, any other scale as
  logits (:func:`cogsub.rerank.blend.normalised`).
- An empty list means "no opinion": the caller keeps its own order.
- Remote failures after retries raise ``UnavailableError``; wrong settings or an
  answer in no known shape raise ``ConfigurationError``.
- The adapter owns its connections; ``close`` releases them.

Recall never calls an adapter directly: :class:`cogsub.rerank.bounded.Reranking`
bounds the candidates and the time, and turns any failure into "no opinion".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Reranker(Protocol):
    """Scores how well each text answers a query (typically a cross-encoder)."""

    @property
    def name(self) -> str:
        """A stable identifier of the model, for logs and metrics."""
        ...

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One relevance score per text, in order (empty: no opinion)."""
        ...

    async def close(self) -> None:
        """Release sessions, pools and clients."""
        ...
