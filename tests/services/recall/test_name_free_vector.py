"""Recall embeds the query without its names (unless the policy says otherwise)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cogsub.core.memory import RecallRequest, RetainRequest
from cogsub.embeddings.hash import HashEmbedder
from cogsub.recall import RankingPolicy

from .stack import live_stack


class RecordingEmbedder(HashEmbedder):
    """The hash embedder, remembering every text it embedded."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return await super().embed(texts)


async def _embedded_queries(root: Path, policy: RankingPolicy | None) -> list[str]:
    embedder = RecordingEmbedder()
    async with live_stack(root, embedder=embedder, policy=policy) as stack:
        said = RetainRequest(content="Melanie: I play clarinet.", wait=True)
        await stack.service.retain("b", said)
        embedder.texts.clear()
        query = "What instruments does Melanie play?"
        response = await stack.service.recall("b", RecallRequest(query=query, reinforce=False))
        assert [r.text for r in response.results] == ["Melanie: I play clarinet."]
    return embedder.texts


async def test_the_vector_query_leaves_the_names_out(data_dir: Path) -> None:
    assert await _embedded_queries(data_dir, None) == ["What instruments does play?"]


async def test_the_policy_can_keep_the_names_in_the_vector_query(data_dir: Path) -> None:
    policy = RankingPolicy(name_free_vector=False)
    queries = await _embedded_queries(data_dir, policy)
    assert queries == ["What instruments does Melanie play?"]
