"""Observations are honest: statements a detail apart are never one observation.

The contrastive fixture goes through the clustering a round uses, with MiniLM vectors
(the default embedder) and lexically (the hash embedder); then the issue's two cases go
through real rounds over the embedded stack.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from benchmarks.consolidation import Pair, Vectors, load_pairs, score, statements

from cogsub.core.events import FactType
from cogsub.core.memory import RetainRequest
from cogsub.embeddings import MiniLMEmbedder
from tests.services.consolidation.stack import NOW, consolidation_stack

BANK = "ops"
#: Paraphrase recall of rounds before details were compared (make bench-consolidation).
RECALL_BEFORE = {"minilm": 36 / 36, "lexical": 35 / 36}


@pytest.fixture(scope="module")
def pairs() -> list[Pair]:
    return load_pairs()


@pytest.fixture(scope="module")
def minilm(pairs: list[Pair]) -> Iterator[Vectors]:
    texts = statements(pairs)
    embedder = MiniLMEmbedder()
    yield {t: tuple(v) for t, v in zip(texts, embedder.embed_sync(texts), strict=True)}
    asyncio.run(embedder.close())


def test_the_fixture_is_contrastive(pairs: list[Pair]) -> None:
    kinds = {p.kind for p in pairs}
    assert len(pairs) >= 60
    assert kinds == {"paraphrase", "entity", "number", "address", "date", "negation"}
    assert all(sum(p.kind == k for p in pairs) >= 8 for k in kinds)


@pytest.mark.parametrize("arm", ["minilm", "lexical"])
def test_near_misses_never_merge_and_paraphrases_still_do(
    arm: str, pairs: list[Pair], minilm: Vectors
) -> None:
    vectors = minilm if arm == "minilm" else {}
    before = score(pairs, vectors, by_details=False)
    after = score(pairs, vectors, by_details=True)
    # Similarity alone merges most near-misses: the fixture tests something.
    assert sum(before.merged_near_misses.values()) >= 40
    assert after.precision == 1.0 and not after.merged_near_misses
    assert after.grouped_near_misses == 0  # not even through a third statement
    assert after.recall >= RECALL_BEFORE[arm]


def _world(content: str, days: int) -> RetainRequest:
    return RetainRequest(
        content=content,
        fact_type=FactType.WORLD,
        timestamp=NOW - timedelta(days=days),
        tags=[f"d{days}"],
        wait=True,
    )


async def test_a_round_never_counts_one_persons_fact_as_proof_for_another(
    tmp_path: Path,
) -> None:
    async with consolidation_stack(tmp_path) as stack:
        said = [
            ("Alice is allergic to peanuts.", 9),
            ("Bob is allergic to peanuts.", 8),
            ("Carol is allergic to peanuts.", 7),
            ("Alice has a peanut allergy.", 3),
        ]
        ids = {}
        for content, days in said:
            ids[days] = (await stack.service.retain(BANK, _world(content, days))).memory_id
        report = await stack.rounds.run(BANK)
        (obs_id,) = report.observations
        obs = await stack.index.get(BANK, obs_id)
        assert obs is not None
        assert obs.summary.startswith("Alice ") and "(observed 2 times" in obs.summary
        assert "proof:2" in obs.tags
        record = await stack.service.get_memory(BANK, obs_id)
        sources = record.archived_event["input"]["structured"]["sources"]
        assert sorted(sources) == sorted([ids[9], ids[3]])


async def test_a_round_never_merges_different_addresses(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        for days, server, ip in [(3, "staging", 5), (2, "production", 6), (1, "backup", 7)]:
            await stack.service.retain(
                BANK, _world(f"The {server} server IP is 10.0.0.{ip}.", days)
            )
        report = await stack.rounds.run(BANK)
        assert report.observations == []
