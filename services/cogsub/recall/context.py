"""Which candidates are neighbours in a conversation (pure: no I/O).

A turn of a conversation often means little alone ("Yes, last Friday!"): the
question before it, or the reply after it, says what it is about. Recall
therefore lets relevance flow between memories of the same session that are
adjacent in time. Only candidates already fetched are linked — the index has
no "next memory" lookup — so adjacency is among the candidates of a session
ordered by time, within ``max_gap_s`` of each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from cogsub.core.documents import IndexDocument
from cogsub.recall.per_document import PerDocument


@dataclass(frozen=True)
class Links:
    """For each candidate (by position), the position of its neighbour before and after."""

    before: tuple[int | None, ...]
    after: tuple[int | None, ...]


#: Timestamps parsed and kept: a recall reads ~230 candidates' three times (links, dates,
#: recency), and a bank's recalls keep meeting the same ones. Timestamps only, never text.
PARSED_TIMESTAMPS = 8_192


@lru_cache(maxsize=PARSED_TIMESTAMPS)
def instant(timestamp: str) -> datetime:
    """The aware datetime of an ISO-8601 document timestamp (``Z`` or an offset)."""
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00"))


#: A document's time in epoch seconds, once per document object (links read every candidate's).
_epoch_s = PerDocument(lambda doc: instant(doc.timestamp).timestamp())


def neighbour_links(documents: Sequence[IndexDocument], *, max_gap_s: float) -> Links:
    """Link each document to the closest earlier and later one of its session.

    Documents without a ``session_id`` have no neighbours; so do documents more
    than ``max_gap_s`` seconds apart. Ties in time are ordered by event id, so
    the links are deterministic.
    """
    before: list[int | None] = [None] * len(documents)
    after: list[int | None] = [None] * len(documents)
    sessions: dict[str, list[tuple[float, str, int]]] = {}
    for position, doc in enumerate(documents):
        if doc.session_id is not None:
            entry = (_epoch_s(doc), doc.event_id, position)
            sessions.setdefault(doc.session_id, []).append(entry)
    for members in sessions.values():
        members.sort()
        for (t0, _, first), (t1, _, second) in zip(members, members[1:], strict=False):
            if t1 - t0 <= max_gap_s:
                after[first] = second
                before[second] = first
    return Links(tuple(before), tuple(after))
