"""`make experiments`: the seed's Experiments 1, 3 and 10 on the project's own ranking code.

Every score comes from ``cogsub.recall.ranking`` (``rank`` / ``score`` with a
``RankingPolicy``) and every novelty age from ``cogsub.recall.service.SessionNovelty``;
nothing here re-implements a ranking formula. Retrieval in these experiments does
not depend on a query, so each turn ranks the whole corpus as candidates whose
fused relevance is 0, under a policy that zeroes every weight the experiment does
not use. The run is deterministic: the seed's published runs add unseeded ±.05
jitter, this one adds none.

Run: ``python -m benchmarks.experiments [--json]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from benchmarks.experiment_corpus import CLUSTERS, MEMORIES, TURNS, Turn, cluster_of
from benchmarks.results import record
from cogsub.core.documents import IndexDocument
from cogsub.recall.policy import RankingPolicy
from cogsub.recall.ranking import Candidate, rank, score
from cogsub.recall.service import SessionNovelty

BANK = "experiments"
SESSION = "experiment-session"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
C1_CEILING = 0.30
CYCLES = 5  # Experiment 10 plays the twenty turns five times

PUBLISHED: dict[str, Any] = {
    "static_k3": {"hit_rate": 0.70, "coverage": 1 / 3},
    "static_k5": {"hit_rate": 0.90, "coverage": 2 / 3},
    "novelty_k5": {
        "hit_rate": 0.95,
        "coverage": 1.0,
        "clusters": {"A": 66, "B": 30, "C": 4},
        "unique_ids": 8,
        "breadth": 0.955,
    },
    "novelty_k3": {"hit_rate": 0.75, "coverage": 2 / 3},
    "count_bonus": {0.0: (0.744, False), 0.02: (0.814, False), 0.05: (0.925, True)},
    "c1_at_005": 0.306,
}


@dataclass(frozen=True)
class Metrics:
    """The seed's metrics over one run of turns."""

    hits: int
    turns: int
    hit_rate: float
    coverage: float
    clusters: dict[str, int]
    unique_ids: int
    breadth: float


def hit_rate(targets: Sequence[frozenset[str]], retrieved: Sequence[Sequence[str]]) -> float:
    """Share of turns with at least one target among that turn's retrieved ids."""
    hits = sum(1 for want, got in zip(targets, retrieved, strict=True) if want & set(got))
    return hits / len(targets) if targets else 0.0


def cluster_coverage(retrieved: Iterable[Sequence[str]], clusters: Iterable[str]) -> float:
    """Share of the clusters that appear in any retrieved list of the run."""
    wanted = set(clusters)
    seen = {cluster_of(memory_id) for ids in retrieved for memory_id in ids}
    return len(seen & wanted) / len(wanted)


def breadth(retrieved: Iterable[Sequence[str]]) -> float:
    """Shannon entropy of the retrieved ids, normalised by log(number of distinct ids).

    Normalising by the distinct ids actually retrieved (not the corpus size) is the
    reading that reproduces the seed's .955; one distinct id (or none) is breadth 0.
    """
    counts = Counter(memory_id for ids in retrieved for memory_id in ids)
    total = sum(counts.values())
    if len(counts) < 2:
        return 0.0
    entropy = -sum(n / total * math.log(n / total) for n in counts.values())
    return entropy / math.log(len(counts))


def measure(turns: Sequence[Turn], retrieved: Sequence[Sequence[str]]) -> Metrics:
    """Every metric of one run."""
    targets = [t.targets for t in turns]
    counts = Counter(cluster_of(memory_id) for ids in retrieved for memory_id in ids)
    rate = hit_rate(targets, retrieved)
    return Metrics(
        hits=round(rate * len(turns)),
        turns=len(turns),
        hit_rate=rate,
        coverage=cluster_coverage(retrieved, CLUSTERS),
        clusters={c: counts.get(c, 0) for c in CLUSTERS},
        unique_ids=len({memory_id for ids in retrieved for memory_id in ids}),
        breadth=breadth(retrieved),
    )


def corpus_documents() -> list[IndexDocument]:
    """The nine memories as the index documents recall ranks."""
    return [
        IndexDocument(
            event_id=m.memory_id,
            timestamp="2026-01-01T00:00:00.000Z",
            event_type="agent_action",
            session_id=SESSION,
            summary=m.text,
            embedding=[],
            importance_score=m.importance,
            reward_score=0.5,
            confidence=0.5,
            object_storage_key=f"{BANK}/{m.memory_id}.json",
            tags=[f"cluster:{m.cluster}"],
            bank_id=BANK,
        )
        for m in MEMORIES
    ]


def only(
    *,
    importance: float = 0.0,
    novelty: float = 0.0,
    reinforcement: float = 0.0,
    novelty_decay: float = 0.5,
) -> RankingPolicy:
    """A policy with every weight 0 except the ones named."""
    return RankingPolicy(
        relevance=0.0,
        importance=importance,
        recency=0.0,
        reward=0.0,
        novelty=novelty,
        reinforcement=reinforcement,
        type_boost=0.0,
        novelty_decay=novelty_decay,
    )


def top_k(
    docs: Sequence[IndexDocument], policy: RankingPolicy, k: int, ages: dict[str, int]
) -> list[str]:
    """The ids of the k best documents of the whole corpus (fused relevance 0)."""
    ranked = rank([Candidate(d) for d in docs], policy, now=NOW, novelty_ages=ages)
    return [s.candidate.document.event_id for s in ranked[:k]]


def static_importance(k: int) -> list[list[str]]:
    """Experiment 1: the same top k by importance on every turn."""
    docs, policy = corpus_documents(), only(importance=1.0)
    return [top_k(docs, policy, k, {}) for _ in TURNS]


def age_right_after() -> int:
    """The age SessionNovelty reports on the turn right after a retrieval (the seed: 0)."""
    tracker = SessionNovelty()
    tracker.shown(BANK, SESSION, ["probe"])
    return tracker.ages(BANK, SESSION)["probe"]


def session_novelty(weight: float, decay: float, k: int, *, seed_ages: bool) -> list[list[str]]:
    """Experiment 3: top k by importance + T · novelty, tracker updated after each turn.

    With ``seed_ages`` the tracker's ages are shifted so the turn right after a
    retrieval is age 0, as the seed counts; otherwise they are used as reported.
    """
    docs = corpus_documents()
    policy = only(importance=1.0, novelty=weight, novelty_decay=decay)
    shift = age_right_after() if seed_ages else 0
    tracker = SessionNovelty()
    retrieved = []
    for _ in TURNS:
        ages = {i: age - shift for i, age in tracker.ages(BANK, SESSION).items()}
        ids = top_k(docs, policy, k, ages)
        tracker.shown(BANK, SESSION, ids)
        retrieved.append(ids)
    return retrieved


@dataclass(frozen=True)
class BonusRun:
    """Experiment 10, one condition: final scores after the 100th turn."""

    cb: float
    a1: float
    c1: float
    c1_max: float
    a1_count: int
    c1_count: int


def _final(doc: IndexDocument, count: int, policy: RankingPolicy) -> float:
    reinforced = doc.model_copy(update={"retrieval_count": count})
    candidate = Candidate(reinforced)
    return score(candidate, policy, now=NOW, novelty_age=None, prefer_observations=False).final


def count_bonus_run(cb: float, *, feedback_k: int | None = None) -> BonusRun:
    """Experiment 10: importance + cb · log2(1 + count) over 100 turns.

    By default the count is the seed's: each turn adds one to the memory that turn
    reinforces. With ``feedback_k`` it is the project's own loop instead: every
    memory returned in the top ``feedback_k`` gets its retrieval count bumped.
    """
    docs = {d.event_id: d for d in corpus_documents()}
    policy = only(importance=1.0, reinforcement=cb)
    counts: Counter[str] = Counter()
    c1_max = _final(docs["c1"], 0, policy)
    for turn in TURNS * CYCLES:
        if feedback_k is None:
            counts[turn.reinforced] += 1
        else:
            current = [d.model_copy(update={"retrieval_count": counts[i]}) for i, d in docs.items()]
            counts.update(top_k(current, policy, feedback_k, {}))
        c1_max = max(c1_max, _final(docs["c1"], counts["c1"], policy))
    return BonusRun(
        cb=cb,
        a1=_final(docs["a1"], counts["a1"], policy),
        c1=_final(docs["c1"], counts["c1"], policy),
        c1_max=c1_max,
        a1_count=counts["a1"],
        c1_count=counts["c1"],
    )


def default_policy_scale() -> tuple[float, float]:
    """Under the default policy: a1's importance + count part at count 0, c1's at count 10."""
    policy = RankingPolicy()
    parts = []
    for memory_id, count in (("a1", 0), ("c1", 10)):
        doc = next(d for d in corpus_documents() if d.event_id == memory_id)
        doc = doc.model_copy(update={"retrieval_count": count})
        b = score(Candidate(doc), policy, now=NOW, novelty_age=None, prefer_observations=False)
        parts.append(
            b.breakdown.weights["importance"] * b.breakdown.importance
            + b.breakdown.weights["reinforcement"] * b.breakdown.reinforcement
        )
    return parts[0], parts[1]


VARIANTS = {"tracker": "SessionNovelty ages as reported", "seed_ages": "seed ages (turn after = 0)"}


def _row(label: str, k: int, metrics: Metrics, published: dict[str, Any]) -> dict[str, Any]:
    return {"run": label, "k": k, "metrics": dataclasses.asdict(metrics), "published": published}


def _variants(shift: int) -> list[str]:
    # With a tracker that already counts the seed's way both variants are one run.
    return ["tracker", "seed_ages"] if shift else ["tracker"]


def _experiment_3(shift: int) -> dict[str, Any]:
    headline = []
    for k, key in ((5, "novelty_k5"), (3, "novelty_k3")):
        for name in _variants(shift):
            retrieved = session_novelty(0.5, 0.5, k, seed_ages=name == "seed_ages")
            headline.append(_row(VARIANTS[name], k, measure(TURNS, retrieved), PUBLISHED[key]))
    grid = []
    for weight in (0.1, 0.5, 0.9):
        for decay in (0.9, 0.5, 0.1):
            cell: dict[str, Any] = {"T": weight, "decay": decay}
            for name in _variants(shift):
                retrieved = session_novelty(weight, decay, 5, seed_ages=name == "seed_ages")
                cell[name] = dataclasses.asdict(measure(TURNS, retrieved))
            grid.append(cell)
    return {"headline": headline, "grid": grid}


def _experiment_10() -> list[dict[str, Any]]:
    rows = []
    for cb, (a1, c1_above) in PUBLISHED["count_bonus"].items():
        run = count_bonus_run(cb)
        rows.append(
            {
                "cb": cb,
                "schedule": dataclasses.asdict(run),
                "c1_within_ceiling": run.c1_max <= C1_CEILING + 1e-9,
                "feedback_k3": dataclasses.asdict(count_bonus_run(cb, feedback_k=3)),
                "published": {
                    "a1": a1,
                    "c1_within_ceiling": not c1_above,
                    "c1": PUBLISHED["c1_at_005"] if c1_above else None,
                },
            }
        )
    return rows


def _matches(metrics: dict[str, Any], published: dict[str, Any]) -> bool:
    return all(
        abs(metrics[key] - want) < 5e-3 if isinstance(want, float) else metrics[key] == want
        for key, want in published.items()
    )


def _bonus_notes(exp10: list[dict[str, Any]]) -> list[str]:
    base = next(r for r in exp10 if r["cb"] == 0.0)
    gains = ", ".join(
        f"+{r['schedule']['a1'] - base['schedule']['a1']:.3f} "
        f"(published +{r['published']['a1'] - base['published']['a1']:.3f})"
        for r in exp10
        if r["cb"]
    )
    over = [f"{r['cb']:.2f}" for r in exp10 if not r["c1_within_ceiling"]]
    published_over = [f"{r['cb']:.2f}" for r in exp10 if not r["published"]["c1_within_ceiling"]]
    a1s = [r["schedule"]["a1"] for r in exp10]
    loop = exp10[-1]["feedback_k3"]
    return [
        f"Experiment 10: a1 at cb = 0 is {base['schedule']['a1']:.3f} (published "
        f"{base['published']['a1']:.3f}) because the project's priority is importance_score x "
        "decay_factor, constant within a session (nothing decays it per turn; decay_factor "
        "changes only through an index patch), while the seed's priority drifts down. The "
        "project's bonus is cb x log2(1 + count) with no per-memory reinforcement factor (the "
        "seed's trailing '· reinforcement' is 1 here), so a1 gains the full cb x "
        f"log2(1 + {base['schedule']['a1_count']}) over cb = 0: {gains}. c1 starts at exactly "
        f".30 with no drift to absorb the bonus, so it exceeds .30 at cb = {', '.join(over)} "
        f"(published: {', '.join(published_over)} only). Ordering agrees: a1 "
        f"{'grows' if a1s == sorted(a1s) else 'does NOT grow'} with cb, and c1 is "
        f"{'above' if not exp10[-1]['c1_within_ceiling'] else 'NOT above'} .30 at the largest cb.",
        "Experiment 10, project loop: recall bumps retrieval_count of every memory it returns, "
        f"so ranking top 3 by importance + cb x log2(1 + count) gives a1 count "
        f"{loop['a1_count']} and c1 count {loop['c1_count']}: c1 is never returned, so it never "
        "gains a bonus; the rich-get-richer effect lands on cluster A instead.",
    ]


def _notes(
    shift: int, exp1: list[dict[str, Any]], exp3: dict[str, Any], exp10: list[dict[str, Any]]
) -> list[str]:
    notes = []
    static3, static5 = exp1[0]["metrics"], exp1[1]["metrics"]
    verdict = "reproduced exactly" if _matches(static3, PUBLISHED["static_k3"]) else "DIFFERS"
    notes.append(
        f"Experiment 1: {verdict} ({static3['hit_rate']:.0%} / {static3['coverage']:.0%}); "
        "ranking by importance alone is deterministic."
    )
    by_run = {(r["run"], r["k"]): r["metrics"] for r in exp3["headline"]}
    tracker = by_run[(VARIANTS["tracker"], 5)]
    if shift:
        seed = by_run[(VARIANTS["seed_ages"], 5)]
        verdict = "reproduces" if _matches(seed, PUBLISHED["novelty_k5"]) else "does NOT reproduce"
        notes.append(
            f"Experiment 3: SessionNovelty reports age {shift} on the turn right after a "
            "retrieval (shown() records the current turn, then advances it; ages() is "
            "turn - seen), while the seed and ranking.novelty's docstring count that turn as "
            f"age 0. So a memory shown last turn keeps novelty 1 - decay^{shift} instead of 0 "
            f"and cluster A keeps winning: C is retrieved {tracker['clusters']['C']} times, "
            f"coverage {tracker['coverage']:.0%}, {tracker['unique_ids']} unique ids. Shifting "
            f"the tracker's ages by -{shift} (still the real rank()) {verdict} the published "
            "headline."
        )
    else:
        verdict = "reproduced exactly" if _matches(tracker, PUBLISHED["novelty_k5"]) else "DIFFERS"
        notes.append(f"Experiment 3: SessionNovelty counts ages the seed's way; {verdict}.")
    notes += _bonus_notes(exp10)
    mine, theirs = default_policy_scale()
    notes.append(
        f"Scale: under RankingPolicy() defaults (importance weight "
        f"{RankingPolicy().importance}, reinforcement {RankingPolicy().reinforcement}) c1 "
        f"with count 10 gets importance + count part {theirs:.3f} vs a1 at count 0 "
        f"{mine:.3f}, so at equal relevance the count bonus outweighs the importance gap; "
        "the seed calibrated cb = .02 against importance weight 1, not .05."
    )
    k3 = "; ".join(
        f"{_pct(m['hit_rate'])} / {_pct(m['coverage'])} with {run}"
        for (run, k), m in by_run.items()
        if k == 3
    )
    notes.append(
        "Caveat: Experiment 1 uses k = 3 and Experiment 3 k = 5. Static importance at k = 5 "
        f"already reaches {_pct(static5['hit_rate'])} / {_pct(static5['coverage'])} "
        f"(published 90% / 67%); novelty at k = 3 reaches {k3} (published about 75% / 67%)."
    )
    empty = [t.number for t in TURNS if not t.targets]
    notes.append(
        f"Caveat: turn {', '.join(map(str, empty))} has no targets, so "
        f"{(len(TURNS) - len(empty)) / len(TURNS):.0%} is the ceiling of the hit rate."
    )
    full = [(run, m["clusters"]["C"]) for (run, k), m in by_run.items() if m["coverage"] == 1.0]
    notes.append(
        "Caveat: 100% coverage is reached only by retrieving cluster C, the contradictory or "
        "useless memories (" + "; ".join(f"{run}: C retrieved {c} times" for run, c in full) + ")."
    )
    notes.append(
        "Caveat: deterministic run, no jitter; the published Experiment 10 runs add unseeded "
        "+/-.05 jitter, so only ordering and rough size are comparable."
    )
    notes.append(
        "Not expressible: the ranking reads importance only; usage frequency, contradiction "
        "and the six links are in the corpus but no signal of ranking.py consumes them."
    )
    return notes


def run_all() -> dict[str, Any]:
    """Every run of the three experiments, with the published numbers and the notes."""
    shift = age_right_after()
    exp1 = [
        _row("static importance", 3, measure(TURNS, static_importance(3)), PUBLISHED["static_k3"]),
        _row("static importance", 5, measure(TURNS, static_importance(5)), PUBLISHED["static_k5"]),
    ]
    exp3 = _experiment_3(shift)
    exp10 = _experiment_10()
    return {
        "deterministic": True,
        "jitter": None,
        "novelty_age_right_after": shift,
        "experiment_1": exp1,
        "experiment_3": exp3,
        "experiment_10": exp10,
        "notes": _notes(shift, exp1, exp3, exp10),
    }


def _pct(value: float) -> str:
    return f"{value:.0%}"


def _cells(m: dict[str, Any]) -> list[str]:
    clusters = "/".join(str(m["clusters"][c]) for c in CLUSTERS)
    return [
        f"{_pct(m['hit_rate'])} ({m['hits']}/{m['turns']})",
        _pct(m["coverage"]),
        clusters,
        str(m["unique_ids"]),
        f"{m['breadth']:.3f}",
    ]


def _published(p: dict[str, Any]) -> str:
    parts = [_pct(p["hit_rate"]), _pct(p["coverage"])]
    if "clusters" in p:
        parts += ["/".join(str(p["clusters"][c]) for c in CLUSTERS), str(p["unique_ids"])]
        parts.append(f"{p['breadth']:.3f}")
    return " · ".join(parts)


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def render(report: dict[str, Any]) -> str:
    """The report as Markdown tables beside the published numbers."""
    metric_heads = ["hit rate", "coverage", "A/B/C", "unique", "breadth"]
    out = [
        "# Seed experiments 1, 3 and 10 on cogsub.recall.ranking (deterministic, no jitter)",
        "",
        "## Experiment 1: static importance",
        "",
    ]
    rows = [
        [r["run"], str(r["k"]), *_cells(r["metrics"]), _published(r["published"])]
        for r in report["experiment_1"]
    ]
    out += _table(["run", "k", *metric_heads, "published"], rows)
    out += ["", "## Experiment 3: importance + T · novelty (headline T = .5, decay = .5)", ""]
    exp3 = report["experiment_3"]
    rows = [
        [r["run"], str(r["k"]), *_cells(r["metrics"]), _published(r["published"])]
        for r in exp3["headline"]
    ]
    out += _table(["novelty ages", "k", *metric_heads, "published"], rows)
    names = [n for n in VARIANTS if n in exp3["grid"][0]]
    rows = [
        [
            f"{c['T']}",
            f"{c['decay']}" + (" (headline)" if (c["T"], c["decay"]) == (0.5, 0.5) else ""),
            *[" · ".join(_cells(c[n])) for n in names],
        ]
        for c in exp3["grid"]
    ]
    heads = [f"{VARIANTS[n]}: hit · cov · A/B/C · unique · breadth" for n in names]
    out += ["", "Grid at k = 5:", ""] + _table(["T", "decay", *heads], rows)
    out += ["", "## Experiment 10: importance + cb · log2(1 + count), 100 turns", ""]
    rows = []
    for r in report["experiment_10"]:
        s, f, p = r["schedule"], r["feedback_k3"], r["published"]
        pub_c1 = "stays below .30" if p["c1_within_ceiling"] else f"{p['c1']:.3f} (> .30)"
        rows.append(
            [
                f"{r['cb']:.2f}",
                f"{s['a1']:.3f} (count {s['a1_count']})",
                f"{p['a1']:.3f}",
                f"{s['c1']:.3f} (count {s['c1_count']})",
                "yes" if r["c1_within_ceiling"] else "no",
                pub_c1,
                f"{f['a1']:.3f} / {f['c1']:.3f}",
            ]
        )
    heads = [
        "cb",
        "a1 @100",
        "published a1",
        "c1 @100",
        "c1 <= .30",
        "published c1",
        "retrieval-count loop k=3: a1 / c1",
    ]
    out += _table(heads, rows)
    out += ["", "## Why the numbers differ, and caveats", ""]
    out += [f"- {note}" for note in report["notes"]]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the experiments and print the report (Markdown, or JSON with ``--json``)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = run_all()
    print(json.dumps(report, indent=2) if args.json else render(report))
    record("experiments", report, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
