"""The turns around anchors, chosen from rows read by time span: no SQL, no I/O.

The neighbour window (see ``neighbours`` in :mod:`cogsub.index.ports`) reads, for
each session, the rows within reach of any of its anchors (:func:`spans`: the
anchors' reaches merged where they overlap), then picks each anchor's turns from
them (:func:`around`). An anchor's span holds every row within its reach, so its
span's rows in (ts_us, event_id) order, cut at the reach, hold exactly the turns a
query per anchor and side would find. A span too dense to read whole is replaced by
the rows those queries found for its anchors (:func:`with_asked`): the nearest rows of
each, so around each anchor nothing that it would pick is missing from them.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Anchor", "AskedRow", "Span", "SpanRow", "around", "spans", "with_asked"]

_P = TypeVar("_P")

#: A row read in a span: (span number, ts_us, event_id, what the caller read of it).
#: Plain tuples: a recall reads hundreds, as SQLite hands them over, and sorts them as is.
SpanRow = tuple[int, int, str, _P]
#: A row found by the query per anchor and side: (anchor number, side: 0 before, 1 after,
#: ts_us, event_id, what the caller read of it).
AskedRow = tuple[int, int, int, str, _P]


@dataclass(frozen=True)
class Anchor:
    """A document whose turns are wanted: its session and its place in it."""

    session_id: str
    at_us: int
    event_id: str


@dataclass(frozen=True)
class Span:
    """Timestamps ``lo_us`` to ``hi_us`` (both included) of one session, read in one go."""

    session_id: str
    lo_us: int
    hi_us: int


def spans(anchors: Sequence[Anchor], reach_us: int) -> tuple[list[Span], list[int]]:
    """The reaches [at - reach, at + reach] of each session, merged where they overlap.

    Returns the spans (by session, then time) and the number of each anchor's span.
    """
    found: list[Span] = []
    span_of = [0] * len(anchors)
    for n in sorted(range(len(anchors)), key=lambda n: (anchors[n].session_id, anchors[n].at_us)):
        anchor = anchors[n]
        lo, hi = anchor.at_us - reach_us, anchor.at_us + reach_us
        last = found[-1] if found else None
        if last is not None and last.session_id == anchor.session_id and lo <= last.hi_us:
            found[-1] = Span(last.session_id, last.lo_us, max(last.hi_us, hi))
        else:
            found.append(Span(anchor.session_id, lo, hi))
        span_of[n] = len(found) - 1
    return found, span_of


def around(
    anchors: Sequence[Anchor],
    span_of: Sequence[int],
    rows: Sequence[SpanRow[_P]],
    each_side: int,
    reach_us: int,
    skip: Collection[str],
) -> list[SpanRow[_P]]:
    """Up to ``each_side`` turns before then after each anchor, nearest first, each once.

    ``rows`` are the rows of the anchors' spans (``span_of`` from :func:`spans`), sorted.
    Before means strictly earlier in (ts_us, event_id) and at most ``reach_us`` earlier;
    after, the same the other way. Turns in ``skip`` count towards ``each_side``: they
    are dropped after the cut, as the statement this replaces dropped them after its LIMIT.
    """
    chosen: dict[str, SpanRow[_P]] = {}
    for anchor, span in zip(anchors, span_of, strict=True):
        place = (span, anchor.at_us, anchor.event_id)
        start = bisect_left(rows, place)  # the first row not before the anchor
        before = _before(rows, start, each_side, span, anchor.at_us - reach_us)
        if start < len(rows) and rows[start][:3] == place:
            start += 1  # the anchor's own row is neither before nor after it
        after = _after(rows, start, each_side, span, anchor.at_us + reach_us)
        for row in (*before, *after):
            if row[2] not in skip:
                chosen.setdefault(row[2], row)
    return list(chosen.values())


def with_asked(
    rows: Iterable[SpanRow[_P]], span_of: Sequence[int], asked: Iterable[AskedRow[_P]]
) -> list[SpanRow[_P]]:
    """``rows`` and the rows found per anchor, as rows of the anchors' spans, once each, sorted.

    Each asked anchor found its nearest rows on each side: every row of its span between
    it and the farthest of them, and when fewer than ``each_side``, every row within reach.
    Mixed with its span's other anchors' rows, they are still its nearest, so :func:`around`
    picks the same turns from them as from the whole span, provided every anchor of the
    span was asked.
    """
    placed = {row[:3]: row for row in rows}
    for n, _, at_us, event_id, payload in asked:
        placed.setdefault((span_of[n], at_us, event_id), (span_of[n], at_us, event_id, payload))
    return sorted(placed.values())


def _before(
    rows: Sequence[SpanRow[_P]], end: int, each_side: int, span: int, earliest_us: int
) -> Iterator[SpanRow[_P]]:
    for n in range(end - 1, max(end - each_side, 0) - 1, -1):
        row = rows[n]
        if row[0] != span or row[1] < earliest_us:
            return
        yield row


def _after(
    rows: Sequence[SpanRow[_P]], start: int, each_side: int, span: int, latest_us: int
) -> Iterator[SpanRow[_P]]:
    for row in rows[start : start + each_side]:
        if row[0] != span or row[1] > latest_us:
            return
        yield row
