"""An Embedder that remembers every vector it computed, for runs that embed texts twice."""

from __future__ import annotations

from collections.abc import Sequence

from cogsub.embeddings.ports import Embedder


class CachingEmbedder:
    """Wraps an Embedder; each distinct text is embedded once per instance.

    An evaluation embeds the same question for the pipeline and for the
    vector-only arm, and ingestion embeds every turn; caching keeps the run to
    one model call per text. Unbounded on purpose: it lives for one run.
    """

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self._vectors: dict[str, list[float]] = {}
        self.misses = 0

    @property
    def name(self) -> str:
        """The wrapped model's name (the vectors are its own)."""
        return self._inner.name

    @property
    def dimension(self) -> int:
        """The wrapped model's dimension."""
        return self._inner.dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text; only texts not seen before reach the wrapped model."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            for text, vector in zip(missing, await self._inner.embed(missing), strict=True):
                self._vectors[text] = vector
            self.misses += len(missing)
        return [self._vectors[t] for t in texts]

    async def close(self) -> None:
        """Close the wrapped embedder and forget the cached vectors."""
        self._vectors.clear()
        await self._inner.close()
