"""The neighbour window's pure parts: spans to read, and each anchor's turns among their rows."""

from __future__ import annotations

import random

from cogsub.index.sqlite.window import Anchor, Span, Turn, around, by_session, spans


def turns(*places: tuple[int, str]) -> list[Turn[str]]:
    """Turns at (ts_us, event_id), each carrying its id as payload, in order."""
    return sorted((Turn(ts, event_id, event_id) for ts, event_id in places), key=lambda t: t[:2])


def ids(chosen: list[Turn[str]]) -> list[str]:
    return [turn.event_id for turn in chosen]


SESSION = turns((10, "a"), (20, "b"), (20, "d"), (20, "f"), (30, "g"), (40, "h"))


def test_before_and_after_are_strict_in_time_then_id_order_nearest_first() -> None:
    anchor = Anchor("s", 20, "d")  # "d" itself is a row: never its own neighbour
    assert ids(around([anchor], {"s": SESSION}, 2, 100, set())) == ["b", "a", "f", "g"]
    # An anchor between two ids of one timestamp splits them by id.
    between = Anchor("s", 20, "c")
    assert ids(around([between], {"s": SESSION}, 1, 100, set())) == ["b", "d"]


def test_reach_includes_both_edges_and_nothing_past_them() -> None:
    anchor = Anchor("s", 20, "d")
    assert ids(around([anchor], {"s": SESSION}, 5, 10, set())) == ["b", "a", "f", "g"]
    assert ids(around([anchor], {"s": SESSION}, 5, 9, set())) == ["b", "f"]
    # Reach 0: only the rows of the anchor's own timestamp.
    assert ids(around([anchor], {"s": SESSION}, 5, 0, set())) == ["b", "f"]


def test_skipped_turns_count_towards_each_side() -> None:
    anchor = Anchor("s", 20, "d")
    assert ids(around([anchor], {"s": SESSION}, 2, 100, {"b", "g"})) == ["a", "f"]
    assert ids(around([anchor], {"s": SESSION}, 1, 100, {"b", "f"})) == []


def test_turns_come_once_in_anchor_then_side_order() -> None:
    first, second = Anchor("s", 30, "g"), Anchor("s", 10, "a")
    chosen = around([first, second], {"s": SESSION}, 2, 100, set())
    # g: before f, d; after h. a: after b, d (d already placed by g).
    assert ids(chosen) == ["f", "d", "h", "b"]
    assert ids(around([first, first], {"s": SESSION}, 1, 100, set())) == ["f", "h"]


def test_nothing_without_rows_of_the_session_or_with_no_side() -> None:
    assert around([Anchor("other", 20, "d")], {"s": SESSION}, 3, 100, set()) == []
    assert around([Anchor("s", 20, "d")], {"s": SESSION}, 0, 100, set()) == []
    assert around([], {"s": SESSION}, 3, 100, set()) == []


def test_spans_merge_overlapping_and_touching_reaches_per_session() -> None:
    anchors = [Anchor("s", 100, "x"), Anchor("s", 10, "y"), Anchor("t", 10, "z")]
    anchors += [Anchor("s", 30, "w"), Anchor("s", 50, "v")]
    # Reaches of s: [0, 20], [20, 40], [40, 60] touch end to end; [90, 110] stands apart.
    assert spans(anchors, 10) == [Span("s", 0, 60), Span("s", 90, 110), Span("t", 0, 20)]
    assert spans(anchors, 0) == [
        Span("s", 10, 10),
        Span("s", 30, 30),
        Span("s", 50, 50),
        Span("s", 100, 100),
        Span("t", 10, 10),
    ]
    assert spans([Anchor("s", 5, "a"), Anchor("s", 5, "b")], 2) == [Span("s", 3, 7)]
    assert spans([], 10) == []


def test_a_chain_of_overlapping_reaches_is_one_span() -> None:
    late, early, far = Anchor("s", 50, "a"), Anchor("s", 45, "b"), Anchor("s", 100, "c")
    assert spans([late, early, far], 30) == [Span("s", 15, 130)]
    assert spans([late, early, far], 20) == [Span("s", 25, 70), Span("s", 80, 120)]


def test_by_session_sorts_each_session_by_time_then_id() -> None:
    rows = [("s", Turn(20, "b", 1)), ("t", Turn(5, "z", 2)), ("s", Turn(10, "c", 3))]
    rows += [("s", Turn(20, "a", 4))]
    assert by_session(rows) == {
        "s": [Turn(10, "c", 3), Turn(20, "a", 4), Turn(20, "b", 1)],
        "t": [Turn(5, "z", 2)],
    }


def slow_around(
    anchors: list[Anchor],
    rows: list[tuple[str, Turn[str]]],
    each_side: int,
    reach: int,
    skip: set[str],
) -> list[str]:
    """The definition, directly: a sorted filter per anchor and side, then skip and repeats."""
    chosen: list[str] = []
    for anchor in anchors:
        place = (anchor.at_us, anchor.event_id)
        same = [turn for session, turn in rows if session == anchor.session_id]
        before = [t for t in same if t[:2] < place and t.ts_us >= anchor.at_us - reach]
        after = [t for t in same if t[:2] > place and t.ts_us <= anchor.at_us + reach]
        nearest = sorted(before, reverse=True)[:each_side] + sorted(after)[:each_side]
        chosen += [t.event_id for t in nearest if t.event_id not in skip | set(chosen)]
    return chosen


def test_around_spans_rows_equals_the_definition_on_random_sessions() -> None:
    for seed in range(300):
        rng = random.Random(seed)
        rows = [
            (rng.choice("st"), Turn(rng.randrange(0, 60), f"e{n:02d}", f"e{n:02d}"))
            for n in range(rng.randrange(0, 40))
        ]
        anchors = [Anchor(rng.choice("stu"), rng.randrange(-5, 65), f"e{rng.randrange(45):02d}")]
        anchors += [Anchor(s, t.ts_us, t.event_id) for s, t in rng.sample(rows, min(4, len(rows)))]
        rng.shuffle(anchors)
        each_side, reach = rng.randrange(0, 5), rng.choice([0, 1, 3, 10, 100])
        skip = {f"e{rng.randrange(45):02d}" for _ in range(rng.randrange(0, 6))}
        expected = slow_around(anchors, rows, each_side, reach, skip)
        # Only the rows inside the anchors' spans are read: the same turns must come out.
        read = [
            (s, t)
            for s, t in rows
            if any(
                p.session_id == s and p.lo_us <= t.ts_us <= p.hi_us for p in spans(anchors, reach)
            )
        ]
        assert ids(around(anchors, by_session(read), each_side, reach, skip)) == expected, seed
        assert ids(around(anchors, by_session(rows), each_side, reach, skip)) == expected, seed
