"""The turns around anchors, chosen from rows read by time span: no SQL, no I/O.

The neighbour window (see ``neighbours`` in :mod:`cogsub.index.ports`) reads, for
each session, the rows within reach of any of its anchors (:func:`spans`: the
anchors' reaches merged where they overlap), then picks each anchor's turns from
them (:func:`around`). A row within an anchor's reach lies in that anchor's span,
so the rows of all of a session's spans, in (ts_us, event_id) order and cut at the
anchor's reach, hold exactly the turns a query per anchor and side would find.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

__all__ = ["Anchor", "Span", "Turn", "around", "by_session", "spans"]

_P = TypeVar("_P")


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


class Turn(NamedTuple, Generic[_P]):
    """A row of a session at (``ts_us``, ``event_id``), with what the caller read of it.

    A tuple, not a dataclass: a recall builds hundreds, and a tuple is built from a row
    at a fraction of the cost.
    """

    ts_us: int
    event_id: str
    payload: _P


def spans(anchors: Iterable[Anchor], reach_us: int) -> list[Span]:
    """Each session's reaches [at - reach, at + reach], those that overlap merged into one."""
    reaches: dict[str, list[tuple[int, int]]] = {}
    for anchor in anchors:
        reaches.setdefault(anchor.session_id, []).append(
            (anchor.at_us - reach_us, anchor.at_us + reach_us)
        )
    merged: list[Span] = []
    for session_id, ranges in reaches.items():
        ranges.sort()
        lo, hi = ranges[0]
        for next_lo, next_hi in ranges[1:]:
            if next_lo > hi:
                merged.append(Span(session_id, lo, hi))
                lo = next_lo
            hi = max(hi, next_hi)
        merged.append(Span(session_id, lo, hi))
    return merged


def by_session(rows: Iterable[tuple[str, Turn[_P]]]) -> dict[str, list[Turn[_P]]]:
    """(session, turn) rows as each session's turns in (ts_us, event_id) order."""
    sessions: dict[str, list[Turn[_P]]] = {}
    for session_id, turn in rows:
        sessions.setdefault(session_id, []).append(turn)
    for turns in sessions.values():
        turns.sort(key=_place)
    return sessions


def around(
    anchors: Sequence[Anchor],
    sessions: Mapping[str, Sequence[Turn[_P]]],
    each_side: int,
    reach_us: int,
    skip: Collection[str],
) -> list[Turn[_P]]:
    """Up to ``each_side`` turns before then after each anchor, nearest first, each once.

    ``sessions`` holds, in (ts_us, event_id) order, every turn of each anchor's session
    within its reach (more is harmless). Before means strictly earlier in (ts_us,
    event_id) and at most ``reach_us`` earlier; after, the same the other way. Turns in
    ``skip`` still count towards ``each_side``: they are dropped after the cut, as the
    statement this replaces dropped them after its LIMIT.
    """
    chosen: dict[str, Turn[_P]] = {}
    for anchor in anchors:
        turns = sessions.get(anchor.session_id, ())
        place = (anchor.at_us, anchor.event_id)
        for turn in _before(turns, place, each_side, anchor.at_us - reach_us):
            if turn.event_id not in skip:
                chosen.setdefault(turn.event_id, turn)
        for turn in _after(turns, place, each_side, anchor.at_us + reach_us):
            if turn.event_id not in skip:
                chosen.setdefault(turn.event_id, turn)
    return list(chosen.values())


def _before(
    turns: Sequence[Turn[_P]], place: tuple[int, str], each_side: int, earliest_us: int
) -> list[Turn[_P]]:
    end = bisect_left(turns, place, key=_place)
    found = []
    for turn in reversed(turns[max(0, end - each_side) : end]):
        if turn.ts_us < earliest_us:
            break
        found.append(turn)
    return found


def _after(
    turns: Sequence[Turn[_P]], place: tuple[int, str], each_side: int, latest_us: int
) -> list[Turn[_P]]:
    start = bisect_right(turns, place, key=_place)
    found = []
    for turn in turns[start : start + each_side]:
        if turn.ts_us > latest_us:
            break
        found.append(turn)
    return found


def _place(turn: Turn[_P]) -> tuple[int, str]:
    return turn.ts_us, turn.event_id
