"""The rule that retires an observation: another one holds all its sources and more.

An observation's id is a function of its sources, so when its cluster grows a
round derives a new observation rather than changing the old one, and the old
one is superseded ("more evidence"). Both a round and ``cogsub replay`` apply
this one rule over the same sets, losers and winners alike: the round over every
live observation it knows (those it scanned, wrote or found written), replay over
every live observation it rebuilds; a round does not write a new observation a live
one already holds and more. That is what lets replay rebuild exactly the live
observations a running index holds, even when a round was killed after it
archived an observation and before it indexed it: by the next round the
cluster may have grown, so that observation is never completed, but its
sources are a subset of the one that replaced it, and replay supersedes it by
the same rule instead of indexing it as live (docs/ranking.md, "Consolidation").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Sources = frozenset[str]


@dataclass(frozen=True)
class Supersession:
    """``loser`` is retired in favour of ``winner``, for ``rule``."""

    loser: str
    winner: str
    rule: str


def more_evidence_rule(winner: Sources, loser: Sources) -> str:
    """The rule text a supersession record and a log line carry."""
    return f"more evidence: {len(winner)} sources instead of {len(loser)}"


def contained_observations(
    current: Mapping[str, Sources], successors: Mapping[str, Sources]
) -> list[Supersession]:
    """Each of ``current`` whose sources are a proper subset of one of ``successors``.

    Its winner is the successor with the most sources (then the smallest id), which
    no other successor contains: supersession never points at an observation that is
    itself retired. An observation without sources (its object unreadable) is never
    retired, and equal source sets are the same observation (one id), so a proper
    subset is required: no two observations retire each other.
    """
    holders: dict[str, list[str]] = {}  # source -> successors holding it
    for succ_id, sources in successors.items():
        for source in sources:
            holders.setdefault(source, []).append(succ_id)
    found: list[Supersession] = []
    for loser_id in sorted(current):
        sources = current[loser_id]
        if not sources:
            continue
        # Any one source will do: a superset holds all of them.
        candidates = holders.get(min(sources), [])
        larger = [s for s in candidates if s != loser_id and sources < successors[s]]
        if larger:
            winner = min(larger, key=lambda s: (-len(successors[s]), s))
            rule = more_evidence_rule(successors[winner], sources)
            found.append(Supersession(loser_id, winner, rule))
    return found
