"""The Embedder contract against every adapter: hash stub, local MiniLM, OpenAI-compatible HTTP."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator

import pytest

pytest.register_assert_rewrite("tests.contract.embedder_contract")

from cogsub.embeddings import HashEmbedder, MiniLMEmbedder, OpenAIEmbedder  # noqa: E402
from tests.contract.embedder_contract import EmbedderContract  # noqa: E402
from tests.fixtures.embedding_server import EmbeddingServer  # noqa: E402


class TestHashEmbedder(EmbedderContract):
    @pytest.fixture
    async def embedder(self) -> AsyncIterator[HashEmbedder]:
        embedder = HashEmbedder()
        yield embedder
        await embedder.close()


class TestHashEmbedderWide(EmbedderContract):
    @pytest.fixture
    async def embedder(self) -> AsyncIterator[HashEmbedder]:
        embedder = HashEmbedder(dimension=384)
        yield embedder
        await embedder.close()


@pytest.fixture(scope="module")
def shared_minilm() -> Iterator[MiniLMEmbedder]:
    """One loaded model for the module: loading costs about half a second."""
    embedder = MiniLMEmbedder(batch_size=4)  # small batches: several per call
    yield embedder
    asyncio.run(embedder.close())


@pytest.mark.model
class TestMiniLMEmbedder(EmbedderContract):
    tolerance = 1e-5
    min_batch_cosine = 0.9999
    long_text_words = 2000

    @pytest.fixture
    def embedder(self, shared_minilm: MiniLMEmbedder) -> MiniLMEmbedder:
        return shared_minilm


class TestOpenAIEmbedder(EmbedderContract):
    @pytest.fixture
    async def embedder(self, embedding_server: EmbeddingServer) -> AsyncIterator[OpenAIEmbedder]:
        embedding_server.reset(dimension=16, api_key="sk-contract-key")
        embedder = OpenAIEmbedder(
            embedding_server.base_url,
            "text-embedding-3-small",
            api_key="sk-contract-key",
            dimension=16,
            batch_size=3,  # several requests per call, so batching is exercised too
        )
        yield embedder
        await embedder.close()


@pytest.mark.skipif(
    not os.environ.get("COGSUB_TEST_OPENAI_URL"),
    reason="set COGSUB_TEST_OPENAI_URL (and _MODEL, _DIMENSION, _API_KEY) to run against a server",
)
class TestOpenAIEmbedderExternal(EmbedderContract):
    """The same contract against a real OpenAI-compatible server of your choice."""

    tolerance = 1e-3  # GPU servers batch non-deterministically
    min_batch_cosine = 0.999
    long_text_words = 1000

    @pytest.fixture
    async def embedder(self) -> AsyncIterator[OpenAIEmbedder]:
        embedder = OpenAIEmbedder(
            os.environ["COGSUB_TEST_OPENAI_URL"],
            os.environ.get("COGSUB_TEST_OPENAI_MODEL", "text-embedding-3-small"),
            api_key=os.environ.get("COGSUB_TEST_OPENAI_API_KEY"),
            dimension=int(os.environ.get("COGSUB_TEST_OPENAI_DIMENSION", "1536")),
        )
        yield embedder
        await embedder.close()
