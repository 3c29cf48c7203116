"""The neighbour window's pure parts: spans to read, and each anchor's turns among their rows."""

from __future__ import annotations

import random

from cogsub.index.sqlite.window import Anchor, AskedRow, Span, SpanRow, around, spans, with_asked

Stored = tuple[str, int, str]  # (session, ts_us, event_id) of a row in the bank


def read(spans_read: list[Span], stored: list[Stored]) -> list[SpanRow[str]]:
    """What the span statement returns: each span's rows, numbered by span, sorted."""
    return sorted(
        (n, ts, event_id, event_id)
        for n, span in enumerate(spans_read)
        for session, ts, event_id in stored
        if session == span.session_id and span.lo_us <= ts <= span.hi_us
    )


def window(
    anchors: list[Anchor], stored: list[Stored], each_side: int, reach: int, skip: set[str]
) -> list[str]:
    """The event ids :func:`around` picks from the rows of the anchors' spans."""
    found, span_of = spans(anchors, reach)
    chosen = around(anchors, span_of, read(found, stored), each_side, reach, skip)
    return [row[2] for row in chosen]


SESSION = [("s", 10, "a"), ("s", 20, "b"), ("s", 20, "d"), ("s", 20, "f"), ("s", 30, "g")]
SESSION += [("s", 40, "h"), ("t", 20, "c"), ("t", 20, "e")]


def test_before_and_after_are_strict_in_time_then_id_order_nearest_first() -> None:
    anchor = Anchor("s", 20, "d")  # "d" itself is a row: never its own neighbour
    assert window([anchor], SESSION, 2, 100, set()) == ["b", "a", "f", "g"]
    # An anchor between two ids of one timestamp splits them by id.
    assert window([Anchor("s", 20, "c")], SESSION, 1, 100, set()) == ["b", "d"]
    # An anchor that is no row of the bank finds its place all the same.
    assert window([Anchor("s", 25, "z")], SESSION, 1, 100, set()) == ["f", "g"]


def test_reach_includes_both_edges_and_nothing_past_them() -> None:
    anchor = Anchor("s", 20, "d")
    assert window([anchor], SESSION, 5, 10, set()) == ["b", "a", "f", "g"]
    assert window([anchor], SESSION, 5, 9, set()) == ["b", "f"]
    # Reach 0: only the rows of the anchor's own timestamp.
    assert window([anchor], SESSION, 5, 0, set()) == ["b", "f"]


def test_skipped_turns_count_towards_each_side() -> None:
    anchor = Anchor("s", 20, "d")
    assert window([anchor], SESSION, 2, 100, {"b", "g"}) == ["a", "f"]
    assert window([anchor], SESSION, 1, 100, {"b", "f"}) == []


def test_turns_come_once_in_anchor_then_side_order() -> None:
    first, second = Anchor("s", 30, "g"), Anchor("s", 10, "a")
    # g: before f, d; after h. a: after b, d (d already placed by g).
    assert window([first, second], SESSION, 2, 100, set()) == ["f", "d", "h", "b"]
    assert window([first, first], SESSION, 1, 100, set()) == ["f", "h"]


def test_turns_never_cross_sessions_or_spans() -> None:
    # "t" rows share the anchor's timestamp but not its session.
    assert window([Anchor("t", 20, "d")], SESSION, 3, 100, set()) == ["c", "e"]
    assert window([Anchor("u", 20, "d")], SESSION, 3, 100, set()) == []
    # Two spans of one session, read back to back: neither anchor reaches into the other's.
    far = [Anchor("s", 10, "a"), Anchor("s", 40, "h")]
    assert window(far, SESSION, 3, 5, set()) == []
    assert window(far, SESSION, 3, 10, set()) == ["b", "d", "f", "g"]


def test_nothing_with_no_side_or_no_anchor() -> None:
    assert window([Anchor("s", 20, "d")], SESSION, 0, 100, set()) == []
    assert window([], SESSION, 3, 100, set()) == []


def test_spans_merge_overlapping_and_touching_reaches_per_session() -> None:
    anchors = [Anchor("s", 100, "x"), Anchor("s", 10, "y"), Anchor("t", 10, "z")]
    anchors += [Anchor("s", 30, "w"), Anchor("s", 50, "v")]
    # Reaches of s: [0, 20], [20, 40], [40, 60] touch end to end; [90, 110] stands apart.
    assert spans(anchors, 10) == (
        [Span("s", 0, 60), Span("s", 90, 110), Span("t", 0, 20)],
        [1, 0, 2, 0, 0],
    )
    assert spans(anchors, 0) == (
        [Span("s", 10, 10), Span("s", 30, 30), Span("s", 50, 50), Span("s", 100, 100)]
        + [Span("t", 10, 10)],
        [3, 0, 4, 1, 2],
    )
    assert spans([Anchor("s", 5, "a"), Anchor("s", 5, "b")], 2) == ([Span("s", 3, 7)], [0, 0])
    assert spans([], 10) == ([], [])


def test_a_chain_of_overlapping_reaches_is_one_span() -> None:
    late, early, far = Anchor("s", 50, "a"), Anchor("s", 45, "b"), Anchor("s", 100, "c")
    assert spans([late, early, far], 30) == ([Span("s", 15, 130)], [0, 0, 0])
    assert spans([late, early, far], 20) == ([Span("s", 25, 70), Span("s", 80, 120)], [0, 0, 1])


def nearest(
    anchor: Anchor, stored: list[Stored], each_side: int, reach: int
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(ts, event_id) of the anchor's turns before and after it, nearest first, by definition."""
    place = (anchor.at_us, anchor.event_id)
    same = [(ts, event_id) for session, ts, event_id in stored if session == anchor.session_id]
    before = [row for row in same if row < place and row[0] >= anchor.at_us - reach]
    after = [row for row in same if row > place and row[0] <= anchor.at_us + reach]
    return sorted(before, reverse=True)[:each_side], sorted(after)[:each_side]


def slow_window(
    anchors: list[Anchor], stored: list[Stored], each_side: int, reach: int, skip: set[str]
) -> list[str]:
    """The definition, directly: a sorted filter per anchor and side, then skip and repeats."""
    chosen: list[str] = []
    for anchor in anchors:
        before, after = nearest(anchor, stored, each_side, reach)
        chosen += [e for _, e in before + after if e not in skip and e not in chosen]
    return chosen


def random_bank(
    seed: int, least_each_side: int
) -> tuple[random.Random, list[Stored], list[Anchor], int, int, set[str]]:
    """A random bank of two sessions, anchors in it or not, and a window's each_side, reach
    and skip; then the generator, for the caller's further draws."""
    rng = random.Random(seed)
    stored = [
        (rng.choice("st"), rng.randrange(0, 60), f"e{n:02d}") for n in range(rng.randrange(40))
    ]
    anchors = [Anchor(rng.choice("stu"), rng.randrange(-5, 65), f"e{rng.randrange(45):02d}")]
    anchors += [Anchor(*row) for row in rng.sample(stored, min(rng.randrange(6), len(stored)))]
    rng.shuffle(anchors)
    each_side, reach = rng.randrange(least_each_side, 5), rng.choice([0, 1, 3, 10, 100])
    skip = {f"e{rng.randrange(45):02d}" for _ in range(rng.randrange(0, 6))}
    return rng, stored, anchors, each_side, reach, skip


def test_the_window_from_spans_equals_the_definition_on_random_banks() -> None:
    compared = 0
    for seed in range(400):
        _, stored, anchors, each_side, reach, skip = random_bank(seed, least_each_side=0)
        expected = slow_window(anchors, stored, each_side, reach, skip)
        assert window(anchors, stored, each_side, reach, skip) == expected, seed
        compared += bool(expected)
    assert compared > 200


def test_rows_found_per_anchor_join_the_rows_read_once_each_in_order() -> None:
    rows: list[SpanRow[str]] = [(0, 10, "a", "a"), (0, 20, "b", "b")]
    found: list[AskedRow[str]] = [
        (2, 1, 40, "h", "h"), (1, 0, 20, "d", "d"), (2, 0, 20, "d", "d"), (0, 1, 20, "b", "b"),
    ]  # fmt: skip
    assert with_asked(rows, [0, 3, 3], found) == [
        (0, 10, "a", "a"), (0, 20, "b", "b"), (3, 20, "d", "d"), (3, 40, "h", "h"),
    ]  # fmt: skip
    assert with_asked([], [], []) == []


def asked_for(
    anchors: list[Anchor], stored: list[Stored], each_side: int, reach: int, numbers: set[int]
) -> list[AskedRow[str]]:
    """What the query per anchor and side finds for the anchors ``numbers``, shuffled."""
    found: list[AskedRow[str]] = []
    for n in numbers:
        before, after = nearest(anchors[n], stored, each_side, reach)
        found += [(n, 0, ts, e, e) for ts, e in before]
        found += [(n, 1, ts, e, e) for ts, e in after]
    random.Random(len(found)).shuffle(found)
    return found


def test_spans_read_and_anchors_asked_merge_as_the_definition_orders_them() -> None:
    compared = asked_some = 0
    for seed in range(400):
        rng, stored, anchors, each_side, reach, skip = random_bank(seed, least_each_side=1)
        found, span_of = spans(anchors, reach)
        dense = {n for n in range(len(found)) if rng.random() < 0.5}  # as the reader would say
        rows = [row for row in read(found, stored) if row[0] not in dense]
        numbers = {n for n, span in enumerate(span_of) if span in dense}
        asked = asked_for(anchors, stored, each_side, reach, numbers)
        chosen = around(anchors, span_of, with_asked(rows, span_of, asked), each_side, reach, skip)
        expected = slow_window(anchors, stored, each_side, reach, skip)
        assert [row[2] for row in chosen] == expected, seed
        compared += bool(expected)
        asked_some += bool(numbers) and len(numbers) < len(anchors)
    assert compared > 200
    assert asked_some > 100  # calls that mixed spans read with anchors asked
