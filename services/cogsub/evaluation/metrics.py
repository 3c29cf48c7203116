"""Evidence recall at k, tallied per retrieval arm and per question category (pure)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


def evidence_recall(ranked: Sequence[str], evidence: Iterable[str], k: int) -> tuple[bool, bool]:
    """(any, all): whether at least one / every evidence id is among the first ``k`` ranked."""
    top = set(ranked[:k])
    wanted = set(evidence)
    return bool(wanted & top), bool(wanted) and wanted <= top


@dataclass
class Tally:
    """Hits of recall_any@k and recall_all@k over the questions seen so far."""

    ks: tuple[int, ...]
    questions: int = 0
    any_hits: dict[int, int] = field(default_factory=dict)
    all_hits: dict[int, int] = field(default_factory=dict)

    def add(self, ranked: Sequence[str], evidence: Iterable[str]) -> None:
        wanted = tuple(evidence)
        self.questions += 1
        for k in self.ks:
            any_hit, all_hit = evidence_recall(ranked, wanted, k)
            self.any_hits[k] = self.any_hits.get(k, 0) + any_hit
            self.all_hits[k] = self.all_hits.get(k, 0) + all_hit

    def rates(self) -> dict[str, float]:
        """``recall_any@K`` and ``recall_all@K`` for each k (0 when no question was seen)."""
        out: dict[str, float] = {}
        for k in self.ks:
            out[f"recall_any@{k}"] = _rate(self.any_hits.get(k, 0), self.questions)
            out[f"recall_all@{k}"] = _rate(self.all_hits.get(k, 0), self.questions)
        return out


ARMS = ("pipeline", "bm25", "vector")


@dataclass
class Scoreboard:
    """One tally per arm, overall and per category."""

    ks: tuple[int, ...]
    overall: dict[str, Tally] = field(default_factory=dict)
    by_category: dict[str, dict[str, Tally]] = field(default_factory=dict)

    def add(self, arm: str, category: str, ranked: Sequence[str], evidence: Sequence[str]) -> None:
        self.overall.setdefault(arm, Tally(self.ks)).add(ranked, evidence)
        per_arm = self.by_category.setdefault(category, {})
        per_arm.setdefault(arm, Tally(self.ks)).add(ranked, evidence)

    def report(self) -> dict[str, object]:
        """The pipeline's rates at top level, the other arms nested by name, then categories."""
        out: dict[str, object] = _arms_report(self.overall, self.ks)
        out["categories"] = {
            category: _arms_report(self.by_category[category], self.ks)
            for category in sorted(self.by_category, key=_category_order)
        }
        return out


def _arms_report(tallies: dict[str, Tally], ks: tuple[int, ...]) -> dict[str, object]:
    pipeline = tallies.get("pipeline", Tally(ks))
    out: dict[str, object] = {"questions": pipeline.questions, **pipeline.rates()}
    for arm in ARMS[1:]:
        out[arm] = tallies.get(arm, Tally(ks)).rates()
    return out


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (``fraction`` in [0, 1]); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def _rate(hits: int, total: int) -> float:
    return round(hits / total, 4) if total else 0.0


def _category_order(category: str) -> tuple[int, str]:
    return (int(category), category) if category.isdigit() else (1 << 30, category)
