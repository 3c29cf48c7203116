"""OpenAIEmbedder against a real local OpenAI-compatible server that replays the API's faults."""

from __future__ import annotations

import math
import socket
import time
from collections.abc import AsyncIterator, Callable

import pytest
from structlog.testing import capture_logs

from cogsub.core.errors import ConfigurationError, InvalidInputError, UnavailableError
from cogsub.embeddings import OpenAIEmbedder, hash_vector
from tests.fixtures.embedding_server import EmbeddingServer

API_KEY = "sk-test-5f1c9e0b7a2d4e8f9c3b"
MODEL = "text-embedding-3-small"

MakeEmbedder = Callable[..., OpenAIEmbedder]


@pytest.fixture
async def make(embedding_server: EmbeddingServer) -> AsyncIterator[MakeEmbedder]:
    """Builds embedders with fast retries against the fixture server; closes them after."""
    made: list[OpenAIEmbedder] = []

    def build(**options: object) -> OpenAIEmbedder:
        settings: dict[str, object] = {
            "base_url": embedding_server.base_url,
            "model": MODEL,
            "api_key": API_KEY,
            "dimension": 8,
            "max_retries": 3,
            "backoff_base_s": 0.01,
            "timeout_s": 5.0,
        }
        settings.update(options)
        embedder = OpenAIEmbedder(**settings)  # type: ignore[arg-type]
        made.append(embedder)
        return embedder

    yield build
    for embedder in made:
        await embedder.close()


async def test_happy_path_sends_the_openai_request(
    make: MakeEmbedder, embedding_server: EmbeddingServer
) -> None:
    texts = ["deploy billing", "cat and tuna"]
    vectors = await make().embed(texts)
    assert vectors == [pytest.approx(hash_vector(t, 8), abs=1e-12) for t in texts]
    (request,) = await embedding_server.requests()
    assert request["body"] == {"model": MODEL, "input": texts}
    assert request["authorization"] == f"Bearer {API_KEY}"
    assert request["content_type"] == "application/json"


async def test_no_key_sends_no_authorization(
    make: MakeEmbedder, embedding_server: EmbeddingServer
) -> None:
    await make(api_key=None).embed(["x"])
    (request,) = await embedding_server.requests()
    assert request["authorization"] is None


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
async def test_base_url_with_or_without_v1(
    make: MakeEmbedder, embedding_server: EmbeddingServer, suffix: str
) -> None:
    embedder = make(base_url=embedding_server.base_url + suffix)
    assert embedder.url == f"{embedding_server.base_url}/v1/embeddings"
    assert len(await embedder.embed(["x"])) == 1


async def test_batches_requests_and_keeps_order(
    make: MakeEmbedder, embedding_server: EmbeddingServer
) -> None:
    texts = [f"text {i}" for i in range(5)]
    vectors = await make(batch_size=2).embed(texts)
    assert vectors == [pytest.approx(hash_vector(t, 8), abs=1e-12) for t in texts]
    inputs = [r["body"]["input"] for r in await embedding_server.requests()]
    assert inputs == [texts[0:2], texts[2:4], texts[4:5]]


async def test_items_are_ordered_by_index(
    make: MakeEmbedder, embedding_server: EmbeddingServer
) -> None:
    await embedding_server.inject("reversed")
    texts = ["alpha", "beta", "gamma"]
    assert await make().embed(texts) == [pytest.approx(hash_vector(t, 8)) for t in texts]


async def test_vectors_are_normalised(
    make: MakeEmbedder, embedding_server: EmbeddingServer
) -> None:
    embedding_server.reset(scale=3.5)
    (vector,) = await make().embed(["not unit length on the wire"])
    assert math.hypot(*vector) == pytest.approx(1.0)
    assert vector == pytest.approx(hash_vector("not unit length on the wire", 8))


async def test_empty_list_sends_nothing_and_empty_text_is_embedded(
    make: MakeEmbedder, embedding_server: EmbeddingServer
) -> None:
    embedder = make()
    assert await embedder.embed([]) == []
    assert await embedding_server.requests() == []
    # The server (like OpenAI) rejects "" as input, so the adapter sends a stand-in.
    (vector,) = await embedder.embed([""])
    assert len(vector) == 8


async def test_retries_429_then_succeeds(
    make: MakeEmbedder, embedding_server: EmbeddingServer
) -> None:
    await embedding_server.inject("429", count=2)
    with capture_logs() as logs:
        assert len(await make().embed(["x"])) == 1
    assert [r["fault"] for r in await embedding_server.requests()] == ["429", "429", None]
    assert [e["event"] for e in logs] == ["embedding_request_retrying"] * 2


async def test_honours_retry_after(make: MakeEmbedder, embedding_server: EmbeddingServer) -> None:
    await embedding_server.inject("429", retry_after=1)
    start = time.monotonic()
    await make(backoff_base_s=0.001).embed(["x"])
    # Our own backoff would be about a millisecond: the wait is the server's second.
    assert time.monotonic() - start >= 0.95


async def test_honours_retry_after_ms(
    make: MakeEmbedder, embedding_server: EmbeddingServer
) -> None:
    await embedding_server.inject("429", retry_after=30, retry_after_ms=300)
    start = time.monotonic()
    await make(backoff_base_s=0.001).embed(["x"])
    assert 0.28 <= time.monotonic() - start < 5


async def test_503_until_retries_run_out_is_unavailable(
    make: MakeEmbedder, embedding_server: EmbeddingServer
) -> None:
    await embedding_server.inject("503", count=10)
    with pytest.raises(UnavailableError, match="503") as caught:
        await make(max_retries=2).embed(["x"])
    assert caught.value.retryable
    assert "3 attempts" in str(caught.value)
    assert len(await embedding_server.requests()) == 3


async def test_timeout_is_retried(make: MakeEmbedder, embedding_server: EmbeddingServer) -> None:
    await embedding_server.inject("hang", hang_s=3)
    vectors = await make(timeout_s=0.3).embed(["x"])
    assert vectors == [pytest.approx(hash_vector("x", 8))]
    assert [r["fault"] for r in await embedding_server.requests()] == ["hang", None]


async def test_persistent_timeout_is_unavailable(
    make: MakeEmbedder, embedding_server: EmbeddingServer
) -> None:
    await embedding_server.inject("hang", count=5, hang_s=3)
    with pytest.raises(UnavailableError, match="timed out"):
        await make(timeout_s=0.2, max_retries=1).embed(["x"])


async def test_refused_connection_is_unavailable(make: MakeEmbedder) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port any more, so every connect is refused.
    with pytest.raises(UnavailableError, match="ConnectError"):
        await make(base_url=f"http://127.0.0.1:{port}", max_retries=1).embed(["x"])


async def test_wrong_dimension_is_a_configuration_error_without_retry(
    make: MakeEmbedder, embedding_server: EmbeddingServer
) -> None:
    await embedding_server.inject("wrong_dimension", dimension=12)
    with pytest.raises(ConfigurationError, match="length 12.*dimension is 8"):
        await make().embed(["x", "y"])
    assert len(await embedding_server.requests()) == 1


async def test_bad_input_carries_the_server_message(
    make: MakeEmbedder, embedding_server: EmbeddingServer
) -> None:
    await embedding_server.inject("400", message="This model's maximum context length is 8192")
    with pytest.raises(InvalidInputError, match="maximum context length is 8192") as caught:
        await make().embed(["x"])
    assert caught.value.problems[0].field == "input"
    assert len(await embedding_server.requests()) == 1


async def test_api_key_never_appears_in_errors_or_logs(
    make: MakeEmbedder, embedding_server: EmbeddingServer
) -> None:
    embedding_server.reset(api_key="sk-the-right-one")
    embedder = make()
    with capture_logs() as logs, pytest.raises(ConfigurationError) as caught:
        await embedder.embed(["x"])
    message = str(caught.value)
    assert "401" in message and "Incorrect API key provided" in message
    assert API_KEY not in message
    assert API_KEY not in repr(embedder)
    assert API_KEY not in str(logs)
    # The server did receive the key: it was sent, only never shown.
    (request,) = await embedding_server.requests()
    assert request["authorization"] == f"Bearer {API_KEY}"


async def test_api_key_absent_from_retry_logs_and_final_error(
    make: MakeEmbedder, embedding_server: EmbeddingServer
) -> None:
    await embedding_server.inject("503", count=10)
    with capture_logs() as logs, pytest.raises(UnavailableError) as caught:
        await make(max_retries=1).embed(["x"])
    assert len(logs) == 1
    assert API_KEY not in str(logs) and API_KEY not in str(caught.value)


@pytest.mark.parametrize(
    "options",
    [{"dimension": 0}, {"batch_size": 0}, {"batch_size": 4096}, {"max_retries": -1}],
)
def test_rejects_impossible_settings(options: dict[str, int]) -> None:
    settings: dict[str, object] = {"base_url": "http://127.0.0.1:1", "model": MODEL, "dimension": 8}
    settings.update(options)
    with pytest.raises(ConfigurationError):
        OpenAIEmbedder(**settings)  # type: ignore[arg-type]
