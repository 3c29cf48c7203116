"""A deterministic, dependency-free stub embedder (the seed's ``stubEmbedding``).

The vectors carry no meaning: they only make every run reproducible so the rest of
the pipeline (archive, index, recall plumbing) can be exercised offline and fast.

How a vector is built, for a text whose UTF-8 bytes are ``b`` and a dimension ``d``:

1. slot ``j`` reads the bytes at positions ``j, j + d, j + 2d, ...`` as one
   little-endian integer and reduces it modulo the Mersenne prime ``2**61 - 1``
   (a polynomial fingerprint of that stripe, computed at C speed by ``int``);
2. the fingerprint is mixed with the slot number and the byte length through a
   64-bit multiply/xor-shift finaliser, so neighbouring slots and texts that only
   differ in length land far apart;
3. the 64-bit result is mapped linearly onto ``[-1, 1)`` and the whole vector is
   L2-normalised.

Only integer arithmetic happens before the final division, so the same text gives
bit-identical vectors on every platform. The empty text is not special-cased: its
fingerprints are all zero and the mixing still yields a fixed unit vector.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

from cogsub.core.errors import ConfigurationError

__all__ = ["HashEmbedder", "hash_vector"]

_PRIME = (1 << 61) - 1
_MASK64 = (1 << 64) - 1
# Odd 64-bit constants with well-spread bits (the golden ratio and two finaliser
# multipliers); any odd constants would do, these avalanche well.
_GOLDEN = 0x9E3779B97F4A7C15
_SLOT_MULT = 0xBF58476D1CE4E5B9
_FINAL_MULT = 0x94D049BB133111EB
_HALF_RANGE = float(1 << 63)
# Above this many texts a call takes milliseconds, so it leaves the event loop.
_INLINE_LIMIT = 512


def hash_vector(text: str, dimension: int = 8) -> list[float]:
    """The unit-length stub vector of ``text`` (see the module docstring).

    Args:
        text: Any string, including the empty one.
        dimension: Length of the vector, at least 1.

    Returns:
        ``dimension`` floats whose Euclidean norm is 1.
    """
    data = text.encode("utf-8")
    length = len(data)
    values: list[float] = []
    for slot in range(dimension):
        x = int.from_bytes(data[slot::dimension], "little") % _PRIME
        x = (x * _GOLDEN + (slot + 1) * _SLOT_MULT + length) & _MASK64
        x ^= x >> 31
        x = (x * _FINAL_MULT) & _MASK64
        x ^= x >> 29
        values.append(x / _HALF_RANGE - 1.0)
    norm = math.hypot(*values)
    if norm == 0.0:
        # Unreachable in practice (every slot would have to hit exactly 2**63);
        # kept so the unit-norm promise holds unconditionally.
        return [1.0] + [0.0] * (dimension - 1)
    return [v / norm for v in values]


class HashEmbedder:
    """Deterministic stub embedder: pure, fast (>100k short texts/s), meaningless.

    Use it in tests, demos and the embedded default where no model is wanted. It
    satisfies the :class:`~cogsub.embeddings.ports.Embedder` port.

    Args:
        dimension: Length of every vector (8 like the seed's stub by default).

    Raises:
        ConfigurationError: ``dimension`` is below 1.
    """

    def __init__(self, dimension: int = 8) -> None:
        if dimension < 1:
            raise ConfigurationError(f"HashEmbedder dimension must be at least 1, got {dimension}")
        self._dimension = dimension

    @property
    def name(self) -> str:
        """``hash-<dimension>``, e.g. ``hash-8``."""
        return f"hash-{self._dimension}"

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        return self._dimension

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, in order, computed on the calling thread."""
        dimension = self._dimension
        return [hash_vector(text, dimension) for text in texts]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, in order.

        A text costs a few microseconds of pure arithmetic, so small calls run on
        the event loop (a thread hop would cost more); large ones go to a thread.
        """
        if len(texts) <= _INLINE_LIMIT:
            return self.embed_sync(texts)
        return await asyncio.to_thread(self.embed_sync, list(texts))

    async def close(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return f"HashEmbedder(dimension={self._dimension})"
