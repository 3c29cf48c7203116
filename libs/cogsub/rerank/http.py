"""Relevance scores from a ``/rerank`` HTTP endpoint: TEI, or the Cohere / Jina shape.

Two wire shapes cover the servers a user is likely to have a cross-encoder behind:

- ``api="tei"`` (Hugging Face text-embeddings-inference, and servers copying it):
  ``POST {query, texts, raw_scores: false, truncate: true}`` → ``[{index, score}]``;
- ``api="cohere"`` (Cohere, Jina, vLLM, LiteLLM, Infinity...):
  ``POST {model, query, documents, top_n}`` → ``{results: [{index, relevance_score}]}``.

Either answer shape is read whichever was asked for (and ``{data: [...]}`` too), so a
server that mixes them still works. Throttling and outages are retried with capped
backoff through :mod:`cogsub.openai_http`, which also keeps the API key out of every
message; recall bounds the whole call with its own deadline
(:class:`cogsub.rerank.bounded.Reranking`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import httpx

from cogsub.core.errors import ConfigurationError
from cogsub.openai_http import Backoff, OpenAICompatibleEndpoint

__all__ = ["HttpReranker", "RerankApi", "parse_scores", "rerank_request"]

RerankApi = Literal["tei", "cohere"]
# Servers reject an empty document; a single space scores as "nothing".
_EMPTY_STAND_IN = " "


def rerank_request(api: RerankApi, model: str, query: str, texts: Sequence[str]) -> dict[str, Any]:
    """The JSON body ``api`` expects for scoring ``texts`` against ``query``."""
    documents = [text or _EMPTY_STAND_IN for text in texts]
    if api == "tei":
        # Probabilities, not logits: the blend reads them as they come.
        return {"query": query, "texts": documents, "raw_scores": False, "truncate": True}
    return {"model": model, "query": query, "documents": documents, "top_n": len(documents)}


def parse_scores(body: object, expected: int) -> list[float]:
    """One score per text, back in the order of the request, from either answer shape.

    Raises:
        ConfigurationError: not a rerank answer, or not exactly one finite score per text.
    """
    items = body.get("results", body.get("data")) if isinstance(body, dict) else body
    if not isinstance(items, list):
        raise ConfigurationError("the rerank answer holds no list of results")
    scores: dict[int, float] = {}
    for item in items:
        index, score = _index_and_score(item)
        if not 0 <= index < expected or index in scores:
            raise ConfigurationError(f"the rerank answer has a wrong or repeated index {index}")
        scores[index] = score
    if len(scores) != expected:
        raise ConfigurationError(f"the rerank answer scored {len(scores)} of {expected} texts")
    return [scores[i] for i in range(expected)]


def _check_url(url: str) -> None:
    # Checked once here: httpx would raise InvalidURL, which is no transport error, on
    # every recall instead.
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ConfigurationError(f"rerank URL {url!r} is not a URL: {exc}") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigurationError(f"rerank URL {url!r} is not an http(s) URL with a host")


def _index_and_score(item: object) -> tuple[int, float]:
    if not isinstance(item, dict):
        raise ConfigurationError("a rerank result is not an object")
    index = item.get("index")
    score = item.get("score", item.get("relevance_score"))
    if not isinstance(index, int) or isinstance(score, bool) or not isinstance(score, int | float):
        raise ConfigurationError("a rerank result lacks an integer index or a numeric score")
    if not math.isfinite(score):
        raise ConfigurationError("a rerank result has a score that is not finite")
    return index, float(score)


class HttpReranker:
    """Reranker over a TEI- or Cohere/Jina-compatible ``/rerank`` endpoint.

    Args:
        url: The full endpoint URL (``http://127.0.0.1:8080/rerank``,
            ``https://api.cohere.com/v2/rerank``, ``https://api.jina.ai/v1/rerank``).
        model: Sent in Cohere-shaped requests (TEI serves one model); also ``name``.
        api_key: Sent as ``Authorization: Bearer``; never logged nor shown.
        api: The request shape, ``"tei"`` or ``"cohere"``.
        timeout_s: Per-attempt timeout (connect, read, write and pool).
        max_retries: Retries after the first attempt on 408, 409, 429, 5xx, timeouts
            and connection errors.
        backoff_base_s: First backoff ceiling; it doubles per retry (full jitter).
        backoff_max_s: Cap on one backoff and on an honoured ``Retry-After``.
    """

    def __init__(
        self,
        url: str,
        *,
        model: str = "",
        api_key: str | None = None,
        api: RerankApi = "tei",
        timeout_s: float = 1.0,
        max_retries: int = 1,
        backoff_base_s: float = 0.05,
        backoff_max_s: float = 0.25,
    ) -> None:
        if max_retries < 0 or timeout_s <= 0:
            raise ConfigurationError("max_retries must be >= 0 and timeout_s > 0")
        if api == "cohere" and not model:
            raise ConfigurationError("a Cohere-shaped rerank API needs a model name")
        _check_url(url)
        self._model = model
        self._api: RerankApi = api
        self._endpoint = OpenAICompatibleEndpoint(
            url,
            what="rerank",
            api_key=api_key,
            timeout_s=timeout_s,
            backoff=Backoff(max_retries + 1, backoff_base_s, backoff_max_s),
            retry_event="rerank_request_retrying",
        )

    @property
    def name(self) -> str:
        """The model name, or the URL when the server serves one unnamed model."""
        return self._model or self._endpoint.url

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text, in order; no request for no texts."""
        if not texts:
            return []
        body = rerank_request(self._api, self._model, query, texts)
        response = await self._endpoint.post(body, api=self._api)
        try:
            answer = response.json()
        except ValueError as exc:
            raise ConfigurationError(f"{self._endpoint.url} answered no JSON") from exc
        return parse_scores(answer, len(texts))

    async def close(self) -> None:
        """Close the HTTP connection pool."""
        await self._endpoint.close()

    def __repr__(self) -> str:
        return f"HttpReranker(url={self._endpoint.url!r}, api={self._api!r}, model={self._model!r})"
