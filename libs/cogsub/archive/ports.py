"""The ArchiveStore port: the truth layer, written once and never overwritten.

Contract every adapter keeps:

- ``put_once`` is atomic: either the whole object becomes visible or nothing
  does, and it raises ``ObjectExistsError`` if any object is already stored
  under the key — whatever its content. Deciding whether an existing object is
  "the same" is the caller's business (see ingestion).
- ``get`` returns the exact bytes that were put, or raises ``NotFoundError``;
  ``get_many`` returns those of the keys that exist (a missing key is left out,
  never an error), in as few round trips as the backend allows.
- ``list`` yields keys under a prefix in lexicographic order.
- ``delete`` erases for good (forget / GDPR); it is the only way an object
  ever changes, and it never fails for a missing key.
- Backends that are down raise ``UnavailableError`` (retryable).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol


class ArchiveStore(Protocol):
    """Write-once object storage keyed by deterministic paths."""

    async def put_once(
        self, key: str, body: bytes, *, content_type: str = "application/json"
    ) -> None:
        """Store ``body`` under ``key`` unless something is already there."""
        ...

    async def get(self, key: str) -> bytes:
        """The stored bytes of ``key``."""
        ...

    async def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The stored bytes of each of ``keys`` that exists, by key."""
        ...

    async def exists(self, key: str) -> bool:
        """Whether an object is stored under ``key``."""
        ...

    def list(self, prefix: str = "") -> AsyncIterator[str]:
        """Keys starting with ``prefix``, in lexicographic order."""
        ...

    async def delete(self, key: str) -> None:
        """Erase ``key`` for good (no error if it is absent)."""
        ...

    async def close(self) -> None:
        """Release clients and threads."""
        ...
