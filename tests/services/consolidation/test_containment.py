"""The rule that retires an observation another one contains, shared by rounds and replay."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cogsub.consolidation.containment import (
    Sources,
    Supersession,
    contained_observations,
    more_evidence_rule,
)

IDS = st.sampled_from([f"o{i}" for i in range(8)])
SOURCES = st.frozensets(st.sampled_from([f"m{i}" for i in range(6)]), max_size=6)
OBSERVATIONS = st.dictionaries(IDS, SOURCES, max_size=8)


def _larger(current: dict[str, Sources], successors: dict[str, Sources], loser: str) -> list[str]:
    """By brute force: the successors holding all of ``loser``'s sources and more."""
    sources = current[loser]
    return [s for s, held in successors.items() if s != loser and sources and sources < held]


@given(OBSERVATIONS, OBSERVATIONS)
def test_exactly_the_contained_ones_are_retired_each_by_its_largest_container(
    current: dict[str, Sources], successors: dict[str, Sources]
) -> None:
    found = contained_observations(current, successors)
    by_loser = {s.loser: s for s in found}
    assert len(by_loser) == len(found)  # one supersession per loser
    assert [s.loser for s in found] == sorted(by_loser)
    for loser in current:
        larger = _larger(current, successors, loser)
        if not larger:
            assert loser not in by_loser
            continue
        winner = by_loser[loser].winner
        assert winner in larger
        assert len(successors[winner]) == max(len(successors[s]) for s in larger)
        assert winner == min(s for s in larger if len(successors[s]) == len(successors[winner]))
        assert by_loser[loser].rule == more_evidence_rule(successors[winner], current[loser])


@given(OBSERVATIONS)
def test_over_one_set_a_winner_is_never_itself_retired(observations: dict[str, Sources]) -> None:
    """Replay's use: every live observation is both current and a possible successor."""
    found = contained_observations(observations, observations)
    assert not {s.winner for s in found} & {s.loser for s in found}
    retired = {s.loser for s in found}
    live = {i: held for i, held in observations.items() if i not in retired}
    for i, held in live.items():
        assert not any(held and held < other for j, other in live.items() if j != i)


@given(OBSERVATIONS, st.data())
def test_the_order_observations_come_in_does_not_matter(
    observations: dict[str, Sources], data: st.DataObject
) -> None:
    shuffled = dict(data.draw(st.permutations(list(observations.items()))))
    assert contained_observations(shuffled, shuffled) == contained_observations(
        observations, observations
    )


def test_a_grown_cluster_retires_its_predecessor_with_the_rule_text() -> None:
    found = contained_observations(
        {"old": frozenset({"a", "b"})}, {"new": frozenset({"a", "b", "c"})}
    )
    assert found == [Supersession("old", "new", "more evidence: 3 sources instead of 2")]


def test_without_sources_equal_sources_or_partial_overlap_nothing_is_retired() -> None:
    abc = frozenset({"a", "b", "c"})
    assert contained_observations({"unread": frozenset()}, {"new": abc}) == []
    assert contained_observations({"same": abc}, {"twin": abc}) == []
    assert contained_observations({"x": frozenset({"a", "d"})}, {"new": abc}) == []
    assert contained_observations({"new": abc}, {"new": abc}) == []
