"""In-memory ArchiveStore: a dict with the write-once semantics of the real stores.

Archives built over the same ``objects`` dict behave like reopening one store,
which is how tests check that data outlives an instance.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from cogsub.core.errors import (
    FieldProblem,
    InvalidInputError,
    NotFoundError,
    ObjectExistsError,
    UnavailableError,
)


class InMemoryArchive:
    """An ArchiveStore held in a dict; pass one ``objects`` dict to several archives to share it."""

    def __init__(self, *, objects: dict[str, bytes] | None = None) -> None:
        self.objects = objects if objects is not None else {}
        self._closed = False

    def _check(self, key: str) -> None:
        if self._closed:
            raise UnavailableError("memory archive is closed")
        if not isinstance(key, str) or not key:
            raise InvalidInputError([FieldProblem("key", f"must be a non-empty str: {key!r}")])

    async def put_once(
        self, key: str, body: bytes, *, content_type: str = "application/json"
    ) -> None:
        """Store ``body`` under ``key``; ``ObjectExistsError`` if anything is there."""
        self._check(key)
        # No await between the check and the store, so concurrent puts cannot both win.
        if key in self.objects:
            raise ObjectExistsError(key)
        self.objects[key] = bytes(body)

    async def get(self, key: str) -> bytes:
        """The stored bytes of ``key``; ``NotFoundError`` if absent."""
        self._check(key)
        try:
            return self.objects[key]
        except KeyError:
            raise NotFoundError(f"no archive object under key {key!r}") from None

    async def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The stored bytes of each of ``keys`` that exists."""
        for key in keys:
            self._check(key)
        return {key: self.objects[key] for key in keys if key in self.objects}

    async def exists(self, key: str) -> bool:
        """Whether an object is stored under ``key``."""
        self._check(key)
        return key in self.objects

    async def list(self, prefix: str = "") -> AsyncIterator[str]:
        """Keys starting with ``prefix``, in lexicographic order (a snapshot)."""
        if self._closed:
            raise UnavailableError("memory archive is closed")
        for key in sorted(k for k in self.objects if k.startswith(prefix)):
            yield key

    async def delete(self, key: str) -> None:
        """Erase ``key`` for good; a missing key is not an error."""
        self._check(key)
        self.objects.pop(key, None)

    async def close(self) -> None:
        """Mark the archive closed; the dict stays for the next archive built on it."""
        self._closed = True
