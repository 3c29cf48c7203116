"""The Embedder port: text in, unit-length vectors out.

Contract every adapter keeps:

- ``embed`` returns one vector per text, in order, each of length ``dimension``.
- The same text always yields the same vector from the same adapter and settings.
- Blocking work (model inference, HTTP) never runs on the event loop.
- Remote failures after retries raise ``UnavailableError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Embedder(Protocol):
    """Turns texts into dense vectors for semantic recall."""

    @property
    def name(self) -> str:
        """A stable identifier of the model (stored beside vectors)."""
        ...

    @property
    def dimension(self) -> int:
        """Length of every vector this embedder returns."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...

    async def close(self) -> None:
        """Release sessions, pools and clients."""
        ...
