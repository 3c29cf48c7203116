"""What recall embeds under each content policy, each text once (the query-vector cache)."""

from __future__ import annotations

from pathlib import Path

from cogsub.core.memory import RecallRequest, RetainRequest
from cogsub.recall import RankingPolicy

from .stack import live_stack
from .test_name_free_vector import RecordingEmbedder

QUESTION = "What instruments does Melanie play?"


async def _embedded(root: Path, policy: RankingPolicy, *queries: str) -> list[str]:
    embedder = RecordingEmbedder()
    async with live_stack(root, embedder=embedder, policy=policy) as stack:
        said = RetainRequest(content="Melanie: I play clarinet.", wait=True)
        await stack.service.retain("b", said)
        embedder.texts.clear()
        for query in queries:
            asked = RecallRequest(query=query, reinforce=False)
            response = await stack.service.recall("b", asked)
            assert [r.text for r in response.results] == ["Melanie: I play clarinet."]
    return embedder.texts


async def test_the_vector_search_can_embed_the_content_alone(data_dir: Path) -> None:
    policy = RankingPolicy(vector_query="content")
    assert await _embedded(data_dir, policy, QUESTION) == ["instruments play"]


async def test_a_second_vector_embeds_the_content_once_beside_the_question(
    data_dir: Path,
) -> None:
    policy = RankingPolicy(content_vector="max")
    texts = await _embedded(data_dir, policy, QUESTION, QUESTION)
    assert texts == ["What instruments does play?", "instruments play"]


async def test_each_facet_embeds_its_question_and_its_content_once(data_dir: Path) -> None:
    policy = RankingPolicy(content_vector="mean")
    texts = await _embedded(data_dir, policy, "Do Melanie and Jon play instruments?")
    # Both facets ("Do Melanie play ...", "Do Jon play ..."), whose name-free forms are one
    # text: it and its content, once each.
    assert sorted(texts) == ["Do play instruments?", "play instruments"]


async def test_no_second_vector_when_the_content_is_the_vector_query(data_dir: Path) -> None:
    policy = RankingPolicy(vector_query="content", content_vector="max")
    assert await _embedded(data_dir, policy, QUESTION) == ["instruments play"]
