"""Clustering and medoids scored as matrices give what the pairwise definition gives."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from cogsub.consolidation.clusters import Member, clusters, medoid
from cogsub.consolidation.similarity import similarity

WORDS = [f"w{i}" for i in range(12)]
WHEN = datetime(2026, 5, 1, tzinfo=UTC)


def pairwise_clusters(
    members: Sequence[Member], *, threshold: float, semantic: bool, min_size: int
) -> list[list[str]]:
    """Single-link by definition: a Python call per pair, components by flooding."""
    ordered = sorted(members, key=lambda m: m.memory_id)
    links = {i: set[int]() for i in range(len(ordered))}
    for i, a in enumerate(ordered):
        for j in range(i + 1, len(ordered)):
            b = ordered[j]
            if similarity(a.words, b.words, a.vector, b.vector, semantic=semantic) >= threshold:
                links[i].add(j)
                links[j].add(i)
    seen: set[int] = set()
    groups = []
    for start in range(len(ordered)):
        if start in seen:
            continue
        component, frontier = {start}, [start]
        while frontier:
            for nxt in links[frontier.pop()] - component:
                component.add(nxt)
                frontier.append(nxt)
        seen |= component
        if len(component) >= min_size:
            groups.append(sorted(ordered[i].memory_id for i in component))
    return sorted(groups)


def pairwise_medoid(group: Sequence[Member], *, semantic: bool) -> str:
    def closeness(m: Member) -> float:
        return sum(
            similarity(m.words, o.words, m.vector, o.vector, semantic=semantic)
            for o in group
            if o is not m
        )

    return max(sorted(group, key=lambda m: m.memory_id), key=closeness).memory_id


vectors = st.one_of(
    st.lists(st.sampled_from([-1.0, 0.0, 0.5, 1.0]), min_size=3, max_size=3).map(tuple),
    st.just(()),  # no vector, or one of another length: the scalar rule decides those
    st.lists(st.sampled_from([0.0, 1.0]), min_size=2, max_size=2).map(tuple),
)
members = st.lists(
    st.tuples(st.frozensets(st.sampled_from(WORDS), max_size=6), vectors),
    max_size=40,
).map(
    lambda rows: [
        Member(f"m{i:03d}", " ".join(sorted(words)), words, vector, WHEN)
        for i, (words, vector) in enumerate(rows)
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    members,
    st.sampled_from([0.0, 0.4, 0.5, 2 / 3, 0.8, 1.0]),
    st.booleans(),
    st.integers(1, 3),
)
def test_clusters_are_the_pairwise_single_link_components(
    found: list[Member], threshold: float, semantic: bool, min_size: int
) -> None:
    got = clusters(found, threshold=threshold, semantic=semantic, min_size=min_size)
    assert sorted([m.memory_id for m in g] for g in got) == pairwise_clusters(
        found, threshold=threshold, semantic=semantic, min_size=min_size
    )
    assert [g[0].memory_id for g in got] == sorted(g[0].memory_id for g in got)


@settings(max_examples=200, deadline=None)
@given(members.filter(bool), st.booleans())
def test_the_medoid_is_the_member_closest_to_all_others(
    group: list[Member], semantic: bool
) -> None:
    assert medoid(group, semantic=semantic).memory_id == pairwise_medoid(group, semantic=semantic)


def test_a_thousand_near_identical_statements_cluster_in_blocks() -> None:
    found = [
        Member(
            f"m{i:04d}", "t", frozenset({"agent", "deployed", "billing", f"ticket{i}"}), (), WHEN
        )
        for i in range(1000)
    ]
    (group,) = clusters(found, threshold=0.5, semantic=False, min_size=2)
    assert len(group) == 1000
    assert medoid(group, semantic=False).memory_id == "m0000"
