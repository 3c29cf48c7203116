"""The default reranker: no model, no call, and the order recall already has."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["NoReranker"]


class NoReranker:
    """The null reranker: every answer is "no opinion", so the ranking stays as it is."""

    @property
    def name(self) -> str:
        """``"none"``."""
        return "none"

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """An empty list: the port's "no opinion"."""
        return []

    async def close(self) -> None:
        """Nothing to release."""
