"""What recall returns from the archive, read once and kept in a bounded cache.

A hit's full text, steps, rationale and source come from its archived event,
and a conflict winner's reason from its supersession records. Archive objects
are written once and never change, so an entry cannot go stale: it can only
outlive a forget, which ``forgotten`` handles (recall cannot reach a forgotten
object anyway: it reads only the keys of documents the index returned, and a
forget takes the document out of the index first). The least recently used
entries go first, so the cache holds what recall keeps returning.

Chosen over carrying the fields in the index document: that would copy every
memory's text and structure into each index row (and into OpenSearch's) for the
few that recall returns; the cache costs one archive read per memory per process.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from cogsub.archive.ports import ArchiveStore
from cogsub.core.errors import NotFoundError
from cogsub.core.events import ArchivedEvent

#: Archived events kept: a recall returns ~10, so thousands of recalls' worth.
DEFAULT_ENTRIES = 8_192

_V = TypeVar("_V")


@dataclass(frozen=True)
class Archived:
    """The parts of an archived event that a recalled memory shows."""

    text: str
    structured: dict[str, object]


@dataclass(frozen=True)
class ReadCounts:
    """How many lookups the cache answered and how many read the archive."""

    hits: int
    misses: int


class _Recent(Generic[_V]):
    """A bounded map that forgets its least recently used key first."""

    def __init__(self, max_entries: int) -> None:
        self._entries: OrderedDict[str, _V] = OrderedDict()
        self._max = max_entries

    def get(self, key: str) -> _V | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: str, value: _V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def drop(self, key: str) -> None:
        self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)


class ArchivedReads:
    """Archive reads for recall, each object read once while it stays among the recent.

    Args:
        archive: The truth layer.
        max_entries: Events kept at most (and as many supersession rules).
    """

    def __init__(self, archive: ArchiveStore, *, max_entries: int = DEFAULT_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, not {max_entries}")
        self._archive = archive
        self._events: _Recent[Archived] = _Recent(max_entries)
        self._rules: _Recent[str] = _Recent(max_entries)
        self._hits = 0
        self._misses = 0

    @property
    def counts(self) -> ReadCounts:
        return ReadCounts(self._hits, self._misses)

    def __len__(self) -> int:
        return len(self._events) + len(self._rules)

    async def events(self, keys: Sequence[str]) -> list[Archived | None]:
        """The archived events at ``keys``, in order; ``None`` where the archive has none."""
        found = {key: event for key in keys if (event := self._events.get(key)) is not None}
        missing = list(dict.fromkeys(key for key in keys if key not in found))
        self._hits += len(keys) - len(missing)
        self._misses += len(missing)
        for key, event in zip(
            missing, await asyncio.gather(*map(self._read, missing)), strict=True
        ):
            if event is not None:
                found[key] = event
                self._events.put(key, event)
        return [found.get(key) for key in keys]

    async def rule(self, key: str) -> str | None:
        """The ``rule`` of the supersession record at ``key``; ``None`` if there is none."""
        known = self._rules.get(key)
        if known is not None:
            self._hits += 1
            return known
        self._misses += 1
        try:
            record = json.loads(await self._archive.get(key))
        except NotFoundError:
            return None
        rule = str(record.get("rule"))
        self._rules.put(key, rule)
        return rule

    def forgotten(self, keys: Iterable[str]) -> None:
        """Drop what the cache holds of these objects (a forget erased them)."""
        for key in keys:
            self._events.drop(key)
            self._rules.drop(key)

    async def _read(self, key: str) -> Archived | None:
        try:
            raw = await self._archive.get(key)
        except NotFoundError:
            return None
        event = ArchivedEvent.model_validate_json(raw)
        structured = event.input.structured
        fields: dict[str, object] = dict(structured) if isinstance(structured, dict) else {}
        return Archived(event.input.text, fields)
