"""The vector cache's tag sets: numbers shared, given back, and tag answers kept in step."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from cogsub.index.sqlite.vectors import TagSets

TAGS = ("a", "b", "c", "proof:1", "proof:2")
tag_sets = st.lists(st.sampled_from(TAGS), max_size=3, unique=True).map(tuple)


def test_documents_with_the_same_tags_share_a_number_and_the_last_gives_it_back() -> None:
    sets = TagSets()
    first, second = sets.take(("a", "b")), sets.take(("a", "b"))
    assert first == second != 0 and sets.take(()) == 0
    sets.release(first)
    assert len(sets) == 2  # still held once: the empty set and ("a", "b")
    sets.release(second)
    assert len(sets) == 1
    assert sets.take(("c",)) == first  # the number is reused
    assert list(sets.holding_any({"a"})[: first + 1]) == [False] * (first + 1)


def test_a_tag_asked_for_before_sets_come_and_go_stays_right_past_growth() -> None:
    sets = TagSets()
    numbers = [sets.take((f"cluster:{i}", "a" if i % 2 else "b")) for i in range(10)]
    assert sets.holding_any({"a"})[numbers].tolist() == [i % 2 == 1 for i in range(10)]
    more = [sets.take((f"unique:{i}", "a")) for i in range(200)]  # past the first capacity
    holding = sets.holding_any({"a"})
    assert holding[numbers].tolist() == [i % 2 == 1 for i in range(10)]
    assert holding[more].all()
    sets.release(more[0])
    assert not sets.holding_any({"a"})[more[0]]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), tag_sets), max_size=60), st.sets(st.sampled_from(TAGS)))
def test_holding_any_matches_the_sets_held(
    steps: list[tuple[bool, tuple[str, ...]]], wanted: set[str]
) -> None:
    sets = TagSets()
    sets.holding_any(wanted)  # cached from the start, then kept in step
    held: Counter[tuple[str, ...]] = Counter()
    numbers: dict[tuple[str, ...], int] = {}
    for release, tags in steps:
        if release and held[tags]:
            held[tags] -= 1
            sets.release(numbers[tags])
        elif not release:
            numbers[tags] = sets.take(tags)
            held[tags] += 1
    live = {tags for tags, count in held.items() if count}
    assert len(sets) == len(live | {()})
    answer = sets.holding_any(wanted)
    for tags in live:
        assert answer[numbers[tags]] == any(tag in tags for tag in wanted)
