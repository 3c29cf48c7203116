"""A bounded cache of query embeddings in front of any Embedder.

Recall embeds one short question per call, and agents ask the same ones again
(a retry, a follow-up turn, the same question of several banks); a model call
costs milliseconds, a lookup microseconds. The port promises the same vector for
the same text from the same model, so an entry never goes stale: keys are
(model name, text) and the least recently used entry goes first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from cogsub.embeddings.ports import Embedder

#: Entries kept by default: 384 floats each as a Python list is ~12 KiB, so ~25 MiB.
DEFAULT_ENTRIES = 2_048


@dataclass(frozen=True)
class CacheCounts:
    """How the cache has served so far."""

    hits: int
    misses: int
    entries: int


class CachedEmbedder:
    """An Embedder that answers texts it embedded lately from memory.

    Args:
        embedder: The model behind the cache.
        max_entries: Vectors kept at most (least recently used evicted first).
    """

    def __init__(self, embedder: Embedder, *, max_entries: int = DEFAULT_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, not {max_entries}")
        self._embedder = embedder
        self._max_entries = max_entries
        self._vectors: OrderedDict[tuple[str, str], list[float]] = OrderedDict()
        self._hits = 0
        self._misses = 0

    @property
    def name(self) -> str:
        return self._embedder.name

    @property
    def dimension(self) -> int:
        return self._embedder.dimension

    @property
    def counts(self) -> CacheCounts:
        return CacheCounts(self._hits, self._misses, len(self._vectors))

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text; only the texts not cached reach the model, in one call."""
        model = self._embedder.name
        known = {t: v for t in texts if (v := self._recalled((model, t))) is not None}
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            fresh = await self._embedder.embed(missing)
            for text, vector in zip(missing, fresh, strict=True):
                known[text] = list(vector)
                self._keep((model, text), known[text])
        self._misses += len(missing)
        self._hits += len(texts) - len(missing)
        # Copies: a caller changing its vector must not change what later callers get.
        return [list(known[text]) for text in texts]

    async def close(self) -> None:
        self._vectors.clear()
        await self._embedder.close()

    def _recalled(self, key: tuple[str, str]) -> list[float] | None:
        vector = self._vectors.get(key)
        if vector is not None:
            self._vectors.move_to_end(key)
        return vector

    def _keep(self, key: tuple[str, str], vector: list[float]) -> None:
        self._vectors[key] = vector
        while len(self._vectors) > self._max_entries:
            self._vectors.popitem(last=False)
