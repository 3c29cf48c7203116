"""Grouping related memories into observations (pure).

Clustering is single-link over a fixed order (event ids), so the same set of
memories always gives the same clusters, whatever order a round read them in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from cogsub.consolidation.similarity import similarity


@dataclass(frozen=True)
class Member:
    """A memory as clustering sees it."""

    memory_id: str
    text: str
    words: frozenset[str]
    vector: tuple[float, ...]
    timestamp: datetime
    proof: int = 1


def clusters(
    members: Sequence[Member], *, threshold: float, semantic: bool, min_size: int
) -> list[list[Member]]:
    """Groups of at least ``min_size`` members, each linked to another above ``threshold``."""
    ordered = sorted(members, key=lambda m: m.memory_id)
    parent = list(range(len(ordered)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, a in enumerate(ordered):
        for j in range(i + 1, len(ordered)):
            b = ordered[j]
            if similarity(a.words, b.words, a.vector, b.vector, semantic=semantic) >= threshold:
                parent[root(j)] = root(i)
    groups: dict[int, list[Member]] = {}
    for i, member in enumerate(ordered):
        groups.setdefault(root(i), []).append(member)
    found = [g for g in groups.values() if len(g) >= min_size]
    return sorted(found, key=lambda g: g[0].memory_id)


def medoid(group: Sequence[Member], *, semantic: bool) -> Member:
    """The member most like all the others (ties: the earliest id)."""

    def closeness(m: Member) -> float:
        return sum(
            similarity(m.words, o.words, m.vector, o.vector, semantic=semantic)
            for o in group
            if o is not m
        )

    return max(sorted(group, key=lambda m: m.memory_id), key=closeness)


def observation_text(group: Sequence[Member], *, semantic: bool) -> str:
    """A rolled-up summary: the most central statement, how often and over what span."""
    centre = medoid(group, semantic=semantic)
    first = min(m.timestamp for m in group)
    last = max(m.timestamp for m in group)
    times = sum(m.proof for m in group)
    span = (
        f"on {first:%d %b %Y}"
        if first.date() == last.date()
        else f"between {first:%d %b %Y} and {last:%d %b %Y}"
    )
    return f"{centre.text.rstrip('.')} (observed {times} times {span})."
