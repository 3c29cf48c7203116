"""`make bench-consolidation`: do observations merge only statements of one fact?

Runs the contrastive pairs of ``tests/fixtures/observation_pairs.jsonl`` through the
clustering a consolidation round uses (``clusters`` at the round's threshold, 0.5),
with the default embedder's vectors (MiniLM, so cosine counts) and, beside them, the
lexical path the ``hash`` embedder gets. Each pair is clustered on its own: merged
or not. Paraphrases of one fact should merge; near-misses (a name, a number, an
address, a date or a negation apart) must not. Each arm runs twice in the same run:
as rounds clustered before details were compared (``by_details=False``, the
baseline) and as they cluster now.

Printed per arm: merge precision (paraphrases among the merged pairs), paraphrase
recall, the near-misses merged by kind, and a whole-fixture check: every fixture
statement in one round, counting near-miss pairs that land in one group (chaining
through a third statement included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.results import record
from cogsub.consolidation import ConsolidationPolicy
from cogsub.consolidation.clusters import Member, clusters
from cogsub.consolidation.similarity import content_words
from cogsub.core.errors import ConfigurationError

FIXTURE = Path(__file__).resolve().parent.parent / "tests/fixtures/observation_pairs.jsonl"
THRESHOLD = ConsolidationPolicy().cluster_threshold
_WHEN = datetime(2026, 5, 1, tzinfo=UTC)

Vectors = Mapping[str, tuple[float, ...]]


@dataclass(frozen=True)
class Pair:
    kind: str  # "paraphrase", or the detail a near-miss differs in
    a: str
    b: str

    @property
    def should_merge(self) -> bool:
        return self.kind == "paraphrase"


@dataclass(frozen=True)
class Scores:
    merged_paraphrases: int
    paraphrases: int
    merged_near_misses: Counter[str]
    near_misses: int
    grouped_near_misses: int
    """Near-miss pairs in one group when every fixture statement is clustered together."""

    @property
    def precision(self) -> float:
        merged = self.merged_paraphrases + sum(self.merged_near_misses.values())
        return self.merged_paraphrases / merged if merged else 1.0

    @property
    def recall(self) -> float:
        return self.merged_paraphrases / self.paraphrases if self.paraphrases else 1.0


def load_pairs(path: Path = FIXTURE) -> list[Pair]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [Pair(row["kind"], row["a"], row["b"]) for row in rows]


def statements(pairs: Sequence[Pair]) -> list[str]:
    return sorted({text for pair in pairs for text in (pair.a, pair.b)})


def _member(text: str, number: int, vectors: Vectors) -> Member:
    return Member(f"m-{number:04d}", text, content_words(text), vectors.get(text, ()), _WHEN)


def _grouped(texts: Sequence[str], vectors: Vectors, *, by_details: bool) -> list[set[str]]:
    members = [_member(text, n, vectors) for n, text in enumerate(texts)]
    found = clusters(
        members, threshold=THRESHOLD, semantic=bool(vectors), min_size=2, by_details=by_details
    )
    return [{m.text for m in group} for group in found]


def score(pairs: Sequence[Pair], vectors: Vectors, *, by_details: bool) -> Scores:
    """Each pair clustered on its own, then every statement in one round."""
    merged = [bool(_grouped([p.a, p.b], vectors, by_details=by_details)) for p in pairs]
    together = _grouped(statements(pairs), vectors, by_details=by_details)
    grouped = [p for p in pairs if not p.should_merge and any({p.a, p.b} <= g for g in together)]
    return Scores(
        merged_paraphrases=sum(m for p, m in zip(pairs, merged, strict=True) if p.should_merge),
        paraphrases=sum(p.should_merge for p in pairs),
        merged_near_misses=Counter(
            p.kind for p, m in zip(pairs, merged, strict=True) if m and not p.should_merge
        ),
        near_misses=sum(not p.should_merge for p in pairs),
        grouped_near_misses=len(grouped),
    )


async def minilm_vectors(texts: Sequence[str]) -> Vectors | None:
    """The default embedder's vectors, or None (with the reason printed) when it cannot load."""
    try:
        from cogsub.embeddings import MiniLMEmbedder

        embedder = MiniLMEmbedder()
        try:
            found = await embedder.embed(list(texts))
        finally:
            await embedder.close()
    except (ConfigurationError, ImportError) as exc:
        print(f"MiniLM is not available ({exc}); only the lexical (hash embedder) arm runs.")
        return None
    return {text: tuple(v) for text, v in zip(texts, found, strict=True)}


def _line(arm: str, rule: str, s: Scores) -> str:
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(s.merged_near_misses.items())) or "none"
    return (
        f"{arm:<16} {rule:<26} precision {s.precision:.3f}  paraphrase recall "
        f"{s.merged_paraphrases}/{s.paraphrases} = {s.recall:.3f}  near-misses merged "
        f"{sum(s.merged_near_misses.values())}/{s.near_misses} ({kinds})  "
        f"grouped in one round {s.grouped_near_misses}"
    )


def _figures(arm: str, rule: str, s: Scores) -> dict[str, Any]:
    return {
        "arm": arm,
        "rule": rule,
        "precision": round(s.precision, 3),
        "paraphrase_recall": round(s.recall, 3),
        "merged_paraphrases": s.merged_paraphrases,
        "paraphrases": s.paraphrases,
        "merged_near_misses": dict(sorted(s.merged_near_misses.items())),
        "near_misses": s.near_misses,
        "grouped_near_misses": s.grouped_near_misses,
    }


async def compare(path: Path) -> list[dict[str, Any]]:
    """Print and return each arm's scores, before and after details are compared."""
    pairs = load_pairs(path)
    print(
        f"{len(pairs)} pairs from {path.name}: {sum(p.should_merge for p in pairs)} paraphrases, "
        f"{sum(not p.should_merge for p in pairs)} near-misses; cluster threshold {THRESHOLD}"
    )
    arms: list[tuple[str, Vectors]] = [("lexical (hash)", {})]
    vectors = await minilm_vectors(statements(pairs))
    if vectors is not None:
        arms.insert(0, ("minilm", vectors))
    rows = []
    for arm, found in arms:
        for rule, by_details in (
            ("before (similarity only)", False),
            ("after (details agree)", True),
        ):
            scores = score(pairs, found, by_details=by_details)
            print(_line(arm, rule, scores))
            rows.append(_figures(arm, rule, scores))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=Path, default=FIXTURE)
    args = parser.parse_args(argv)
    record("consolidation", asyncio.run(compare(args.pairs)), argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
