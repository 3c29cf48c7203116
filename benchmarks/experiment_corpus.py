"""The corpus of the seed's retrieval experiments 1, 3 and 10, as data.

Nine memories in three clusters, the six links between them and the twenty
turns of one session (targets and the memory reinforced on each turn). The
numbers are the seed's (``/work/shared/experiments.md``); the memory texts are
our own, written to fit each cluster. Retrieval in these experiments ignores the
text (every turn ranks the whole corpus), so the texts only make the corpus
readable and usable by experiments that do search it.

The project's ranking reads only ``importance``. Usage frequency, contradiction
and the links are kept so the corpus is complete, but no signal of
``cogsub.recall.ranking`` consumes them.
"""

from __future__ import annotations

from dataclasses import dataclass

CLUSTERS: dict[str, str] = {
    "A": "deployment reliability",
    "B": "novel observations",
    "C": "contradictory or useless",
}


@dataclass(frozen=True)
class Memory:
    """One memory with the seed's three per-memory numbers."""

    memory_id: str
    cluster: str
    text: str
    importance: float
    usage_frequency: float
    contradiction: float


@dataclass(frozen=True)
class Link:
    """A typed, weighted edge between two memories."""

    source: str
    target: str
    kind: str
    weight: float


@dataclass(frozen=True)
class Turn:
    """One turn of the session: what should be retrieved, and what gets reinforced."""

    number: int
    targets: frozenset[str]
    reinforced: str


MEMORIES: tuple[Memory, ...] = (
    Memory(
        "a1",
        "A",
        "Checkout deploys go out cleanly when the canary runs for ten minutes before the "
        "full rollout.",
        0.85,
        0.70,
        0.05,
    ),
    Memory(
        "a2",
        "A",
        "The two checkout rollouts that skipped the canary both failed their health checks "
        "within a minute.",
        0.80,
        0.60,
        0.05,
    ),
    Memory(
        "a3",
        "A",
        "A failed health check rolls the release back automatically in about ninety "
        "seconds, so bad builds rarely reach customers.",
        0.75,
        0.50,
        0.00,
    ),
    Memory(
        "a4",
        "A",
        "Since the ten-minute canary became the rule, the weekly share of failed deploys "
        "fell from twelve to two percent.",
        0.70,
        0.40,
        0.05,
    ),
    Memory(
        "b1",
        "B",
        "Search latency jumps every night at three o'clock UTC, exactly when the index "
        "compaction job starts.",
        0.60,
        0.10,
        0.10,
    ),
    Memory(
        "b2",
        "B",
        "While compaction runs, disk reads on the search replicas double and their page "
        "cache hit rate halves.",
        0.65,
        0.05,
        0.15,
    ),
    Memory(
        "b3",
        "B",
        "Deploys started during compaction need twice as long to get through the canary.",
        0.55,
        0.05,
        0.10,
    ),
    Memory(
        "c1",
        "C",
        "Canaries only add delay and never catch anything; shipping straight to production "
        "is just as safe.",
        0.30,
        0.15,
        0.80,
    ),
    Memory(
        "c2",
        "C",
        "Someone mentioned that the third-floor coffee machine was replaced last Tuesday.",
        0.15,
        0.05,
        0.20,
    ),
)

LINKS: tuple[Link, ...] = (
    Link("a1", "a2", "causal", 0.80),
    Link("a2", "a3", "causal", 0.70),
    Link("a1", "a4", "temporal", 0.60),
    Link("b3", "a1", "derived_from", 0.65),
    Link("b1", "b2", "semantic", 0.75),
    Link("c1", "a1", "contradicts", 0.85),
)


def _turn(number: int, targets: str, reinforced: str) -> Turn:
    return Turn(number, frozenset(targets.split()), reinforced)


TURNS: tuple[Turn, ...] = (
    _turn(1, "a1 a2", "a1"),
    _turn(2, "a2 a1", "a2"),
    _turn(3, "a3 a2", "a3"),
    _turn(4, "a1 a4", "a1"),
    _turn(5, "a4 a1", "a4"),
    _turn(6, "a2 a3", "a2"),
    _turn(7, "b1 b2", "b1"),
    _turn(8, "b2 b1", "b2"),
    _turn(9, "b3 a1", "b3"),
    _turn(10, "b1 b3", "b1"),
    _turn(11, "a1", "c1"),
    _turn(12, "", "c2"),
    _turn(13, "a1", "c1"),
    _turn(14, "a3 b1", "a3"),
    _turn(15, "b2 a4", "b2"),
    _turn(16, "a4 a1", "a4"),
    _turn(17, "a1 b3", "a1"),
    _turn(18, "b3 b1 a1", "b3"),
    _turn(19, "b1 b2 b3", "b1"),
    _turn(20, "a2 a1 b3", "a2"),
)


def cluster_of(memory_id: str) -> str:
    """The cluster letter of one memory id."""
    return next(m.cluster for m in MEMORIES if m.memory_id == memory_id)
