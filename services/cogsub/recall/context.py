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
from datetime import UTC, datetime, timedelta
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from cogsub.core.documents import IndexDocument
from cogsub.recall.per_document import PerDocument

_Positions = npt.NDArray[np.intp]


@dataclass(frozen=True)
class Links:
    """For each candidate (by position), the position of its neighbour before and after.

    As arrays (``-1``: none), which fusion works on; ``before`` and ``after`` read them
    as tuples.
    """

    before_at: _Positions
    after_at: _Positions

    @property
    def before(self) -> tuple[int | None, ...]:
        return _optional(self.before_at)

    @property
    def after(self) -> tuple[int | None, ...]:
        return _optional(self.after_at)


def _optional(positions: _Positions) -> tuple[int | None, ...]:
    return tuple(None if j < 0 else j for j in positions.tolist())


#: Timestamps parsed and kept: a recall reads ~230 candidates' three times (links, dates,
#: recency), and a bank's recalls keep meeting the same ones. Timestamps only, never text.
PARSED_TIMESTAMPS = 8_192


@lru_cache(maxsize=PARSED_TIMESTAMPS)
def instant(timestamp: str) -> datetime:
    """The aware datetime of an ISO-8601 document timestamp (``Z`` or an offset)."""
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00"))


#: A document's time in epoch seconds, once per document object (links read every candidate's).
_epoch_s = PerDocument(lambda doc: instant(doc.timestamp).timestamp())

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def epoch_us(moment: datetime) -> int:
    """Whole microseconds since the epoch of an aware datetime (exact, unlike a float)."""
    return (moment - _EPOCH) // _MICROSECOND


#: A document's time in whole epoch microseconds, once per document object (for recency).
document_us = PerDocument(lambda doc: epoch_us(instant(doc.timestamp)))


def neighbour_links(
    documents: Sequence[IndexDocument],
    *,
    max_gap_s: float,
    times: Sequence[float] | None = None,
) -> Links:
    """Link each document to the closest earlier and later one of its session.

    Documents without a ``session_id`` have no neighbours; so do documents more
    than ``max_gap_s`` seconds apart. Ties in time are ordered by event id, so
    the links are deterministic. One sort of every placed document by (session,
    time, id) on arrays, then each document is linked to the next in that order.
    ``times`` are the documents' epoch seconds when the caller has read them already.
    """
    before = np.full(len(documents), -1, dtype=np.intp)
    after = np.full(len(documents), -1, dtype=np.intp)
    placed = [n for n, doc in enumerate(documents) if doc.session_id is not None]
    if len(placed) < 2:
        return Links(before, after)
    docs = [documents[n] for n in placed]
    codes: dict[str | None, int] = {}
    sessions = np.array([codes.setdefault(d.session_id, len(codes)) for d in docs])
    seconds = [_epoch_s(d) for d in docs] if times is None else [times[n] for n in placed]
    at = np.array(seconds, dtype=np.float64)
    ids = [d.event_id for d in docs]
    id_place = np.empty(len(ids), dtype=np.intp)
    id_place[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
    order = np.lexsort((id_place, at, sessions))
    position, session, time = np.asarray(placed)[order], sessions[order], at[order]
    linked = (session[1:] == session[:-1]) & (time[1:] - time[:-1] <= max_gap_s)
    first, second = position[:-1][linked], position[1:][linked]
    after[first] = second
    before[second] = first
    return Links(before, after)
