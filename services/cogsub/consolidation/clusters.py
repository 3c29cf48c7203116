"""Grouping related memories into observations (pure).

Clustering is single-link over a fixed order (event ids), so the same set of
memories always gives the same clusters, whatever order a round read them in.

A round clusters up to ``max_scan`` memories, so every pair is scored: as matrix
products (word overlaps of the words shared by two or more members, and cosines),
a block of rows at a time, instead of a Python call per pair. The scores are the
ones :func:`~cogsub.consolidation.similarity.similarity` gives: overlaps are
exact integers, so the Dice values are the same floats, and a cosine within
rounding of the threshold, or a closeness within rounding of the best, is
decided by the scalar functions.

Asked to (``by_details``), clustering never puts two memories whose details
disagree (:mod:`~cogsub.consolidation.distinct`: a name, a number, an address, a
date, a negation) in one group, however alike they score: "Alice is allergic to
peanuts." is no proof that Bob is. Each group keeps what all its members agree on,
so a link is taken only when it agrees with every member on both sides.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

from cogsub.consolidation.distinct import Details, details
from cogsub.consolidation.similarity import similarity

#: Rows scored at once: bounds the temporary matrices to ``_BLOCK`` x members.
_BLOCK = 256
#: Float sums and products this close to a decision are redone one pair at a time.
_ROUNDING = 1e-9


@dataclass(frozen=True)
class Member:
    """A memory as clustering sees it."""

    memory_id: str
    text: str
    words: frozenset[str]
    vector: tuple[float, ...]
    timestamp: datetime
    proof: int = 1


@dataclass(frozen=True)
class _Agreement:
    """What every member of a group says alike: its strict details, names, and words."""

    strict: tuple[object, ...]
    names: frozenset[str]
    words: frozenset[str]
    """The words every member has: where another group's names must all be found."""

    @classmethod
    def of(cls, found: Details) -> _Agreement:
        return cls(found.strict, found.names, found.words)

    def admits(self, other: _Agreement) -> bool:
        return (
            self.strict == other.strict and self.names <= other.words and other.names <= self.words
        )

    def joined(self, other: _Agreement) -> _Agreement:
        return _Agreement(self.strict, self.names | other.names, self.words & other.words)


def clusters(
    members: Sequence[Member],
    *,
    threshold: float,
    semantic: bool,
    min_size: int,
    by_details: bool = False,
) -> list[list[Member]]:
    """Groups of at least ``min_size`` members, each linked to another above ``threshold``.

    With ``by_details``, a link between members whose details disagree, or that would
    join a group one of whose members disagrees with the other side, is not taken.
    """
    ordered = sorted(members, key=lambda m: m.memory_id)
    parent = list(range(len(ordered)))
    agreed = [_Agreement.of(details(m.text)) for m in ordered] if by_details else []

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in _linked_pairs(ordered, threshold=threshold, semantic=semantic):
        top, below = root(i), root(j)
        if top == below:
            continue
        if by_details:
            if not agreed[top].admits(agreed[below]):
                continue
            agreed[top] = agreed[top].joined(agreed[below])
        parent[below] = top
    groups: dict[int, list[Member]] = {}
    for i, member in enumerate(ordered):
        groups.setdefault(root(i), []).append(member)
    found = [g for g in groups.values() if len(g) >= min_size]
    return sorted(found, key=lambda g: g[0].memory_id)


def medoid(group: Sequence[Member], *, semantic: bool) -> Member:
    """The member most like all the others (ties: the earliest id)."""
    ordered = sorted(group, key=lambda m: m.memory_id)
    scores = _Scores(ordered, semantic=semantic)
    closeness = np.zeros(len(ordered))
    for start, block in scores.blocks():
        rows = np.arange(start, start + block.shape[0])
        block[np.arange(block.shape[0]), rows] = 0.0  # a member is not its own neighbour
        closeness[rows] = block.sum(axis=1)
    best = closeness.max(initial=0.0)
    near = [m for m, c in zip(ordered, closeness, strict=True) if c >= best - _ROUNDING]

    def exact(m: Member) -> float:
        return sum(
            similarity(m.words, o.words, m.vector, o.vector, semantic=semantic)
            for o in ordered
            if o is not m
        )

    return max(near, key=exact)


def observation_text(group: Sequence[Member], centre: Member) -> str:
    """A rolled-up summary: the ``centre`` statement (the medoid), how often, over what span."""
    first = min(m.timestamp for m in group)
    last = max(m.timestamp for m in group)
    times = sum(m.proof for m in group)
    span = (
        f"on {first:%d %b %Y}"
        if first.date() == last.date()
        else f"between {first:%d %b %Y} and {last:%d %b %Y}"
    )
    return f"{centre.text.rstrip('.')} (observed {times} times {span})."


def _linked_pairs(
    ordered: Sequence[Member], *, threshold: float, semantic: bool
) -> Iterator[tuple[int, int]]:
    """Every ``(i, j)``, ``i < j``, whose similarity reaches ``threshold``."""
    scores = _Scores(ordered, semantic=semantic)
    for start, block in scores.blocks(threshold=threshold):
        rows, cols = np.nonzero(block >= threshold)
        for i, j in zip((rows + start).tolist(), cols.tolist(), strict=True):
            if i < j:
                yield i, j


class _Scores:
    """All pairwise similarities of ``members``, as blocks of rows."""

    def __init__(self, members: Sequence[Member], *, semantic: bool) -> None:
        self._members = members
        self._sizes = np.array([len(m.words) for m in members], dtype=np.float64)
        self._words = _incidence([m.words for m in members])
        self._unit: npt.NDArray[np.float64] | None = None
        self._odd: list[int] = []
        if semantic:
            self._unit, self._odd = _unit_rows([m.vector for m in members])

    def blocks(
        self, *, threshold: float | None = None
    ) -> Iterator[tuple[int, npt.NDArray[np.float64]]]:
        """``(first row, scores of rows first.. against all members)``."""
        n = len(self._members)
        for start in range(0, n, _BLOCK):
            stop = min(n, start + _BLOCK)
            overlap = (self._words[start:stop] @ self._words.T).astype(np.float64)
            total = self._sizes[start:stop, None] + self._sizes[None, :]
            dice = np.divide(2 * overlap, total, out=np.zeros_like(overlap), where=total > 0)
            if self._unit is not None:
                cosines = self._unit[start:stop] @ self._unit.T
                self._settle(cosines, start, threshold)
                dice = np.maximum(dice, cosines)
            yield start, dice

    def _settle(
        self, cosines: npt.NDArray[np.float64], start: int, threshold: float | None
    ) -> None:
        """Redo, one pair at a time, what rounding could put on the wrong side of a decision."""
        members = self._members
        unsure = np.abs(cosines - threshold) <= _ROUNDING if threshold is not None else None
        # A vector of another length has a zero row, which is right against the others
        # (cosine 0) but not against one more of its own length: its row is redone.
        for odd in self._odd:
            if start <= odd < start + cosines.shape[0]:
                cosines[odd - start, :] = np.nan
        pending = np.isnan(cosines) if unsure is None else (unsure | np.isnan(cosines))
        for r, c in zip(*np.nonzero(pending), strict=True):
            a, b = members[start + int(r)], members[int(c)]
            cosines[r, c] = similarity(frozenset(), frozenset(), a.vector, b.vector, semantic=True)


def _incidence(word_sets: Sequence[frozenset[str]]) -> npt.NDArray[np.float32]:
    """Members x words (1 where the member has the word), over the words two members share."""
    seen: dict[str, int] = {}
    for words in word_sets:
        for word in words:
            seen[word] = seen.get(word, 0) + 1
    columns = {word: c for c, word in enumerate(w for w, k in seen.items() if k > 1)}
    matrix = np.zeros((len(word_sets), len(columns)), dtype=np.float32)
    for row, words in enumerate(word_sets):
        matrix[row, [columns[w] for w in words if w in columns]] = 1.0
    return matrix


def _unit_rows(
    vectors: Sequence[tuple[float, ...]],
) -> tuple[npt.NDArray[np.float64], list[int]]:
    """Unit rows of the vectors of the most common length, and the rows of any other length."""
    lengths = [len(v) for v in vectors]
    dimension = max(set(lengths), key=lambda d: (lengths.count(d), d)) if lengths else 0
    odd = [i for i, d in enumerate(lengths) if d != dimension]
    matrix = np.zeros((len(vectors), dimension), dtype=np.float64)
    for i, vector in enumerate(vectors):
        if len(vector) == dimension:
            matrix[i] = vector
    norms = np.linalg.norm(matrix, axis=1)
    matrix = np.divide(matrix, norms[:, None], out=np.zeros_like(matrix), where=norms[:, None] > 0)
    return matrix, odd
