"""What recall returns from the archive, read once and kept in a bounded cache.

A hit's full text, steps, rationale and source come from its archived event,
and a conflict winner's reason from its supersession records. Archive objects
are written once and never change, so an entry cannot go stale: it can only
outlive a forget. Recall cannot reach a forgotten object (it reads only the keys
of documents the index returned, and a forget takes the document out of the
index first), but its text must not stay in memory either: ``forgotten`` drops
it at once where the caller knows the keys, and no entry lives longer than
``max_age_s`` (a forget in another process, or one nobody reported). The least
recently used entries go first, so the cache holds what recall keeps returning.

Chosen over carrying the fields in the index document: that would copy every
memory's text and structure into each index row (and into OpenSearch's) for the
few that recall returns; the cache costs one archive read per memory per process.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from cogsub.archive.ports import ArchiveStore
from cogsub.core.errors import NotFoundError
from cogsub.core.events import ArchivedEvent

#: Archived events kept: a recall returns ~10, so thousands of recalls' worth.
DEFAULT_ENTRIES = 8_192
#: Seconds an entry is kept at most: how long a forgotten text may outlive its forget here.
DEFAULT_MAX_AGE_S = 300.0

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
    """A bounded map that forgets its least recently used key first, and old keys."""

    def __init__(self, max_entries: int, max_age_s: float, clock: Callable[[], float]) -> None:
        self._entries: OrderedDict[str, tuple[_V, float]] = OrderedDict()
        self._max = max_entries
        self._max_age_s = max_age_s
        self._clock = clock

    def get(self, key: str) -> _V | None:
        found = self._entries.get(key)
        if found is None:
            return None
        if found[1] <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return found[0]

    def put(self, key: str, value: _V) -> None:
        self._entries[key] = (value, self._clock() + self._max_age_s)
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
        max_age_s: Seconds an entry is kept at most, however often it is used.
        clock: Monotonic seconds.
    """

    def __init__(
        self,
        archive: ArchiveStore,
        *,
        max_entries: int = DEFAULT_ENTRIES,
        max_age_s: float = DEFAULT_MAX_AGE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, not {max_entries}")
        self._archive = archive
        self._events: _Recent[Archived] = _Recent(max_entries, max_age_s, clock)
        self._rules: _Recent[str] = _Recent(max_entries, max_age_s, clock)
        # When each key was last forgotten (a count of forgets), so a read that was in
        # flight during its forget does not put the erased text back.
        self._forgets = 0
        self._forgotten_at: _Recent[int] = _Recent(max_entries, max_age_s, clock)
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
        began = self._forgets
        read = await self._archive.get_many(missing) if missing else {}
        for key, raw in read.items():
            event = _archived(raw)
            found[key] = event
            if self._unchanged_since(key, began):
                self._events.put(key, event)
        return [found.get(key) for key in keys]

    async def rule(self, key: str) -> str | None:
        """The ``rule`` of the supersession record at ``key``; ``None`` if there is none."""
        known = self._rules.get(key)
        if known is not None:
            self._hits += 1
            return known
        self._misses += 1
        began = self._forgets
        try:
            record = json.loads(await self._archive.get(key))
        except NotFoundError:
            return None
        rule = str(record.get("rule"))
        if self._unchanged_since(key, began):
            self._rules.put(key, rule)
        return rule

    def forgotten(self, keys: Iterable[str]) -> None:
        """Drop what the cache holds of these objects (a forget erased them)."""
        self._forgets += 1
        for key in keys:
            self._events.drop(key)
            self._rules.drop(key)
            self._forgotten_at.put(key, self._forgets)

    def _unchanged_since(self, key: str, began: int) -> bool:
        """Whether ``key`` was not forgotten after a read that began at ``began``."""
        at = self._forgotten_at.get(key)
        return at is None or at <= began


def _archived(raw: bytes) -> Archived:
    event = ArchivedEvent.model_validate_json(raw)
    structured = event.input.structured
    fields: dict[str, object] = dict(structured) if isinstance(structured, dict) else {}
    return Archived(event.input.text, fields)
