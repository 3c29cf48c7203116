"""Embeddings from any OpenAI-compatible HTTP endpoint (``POST /v1/embeddings``).

Works with OpenAI itself and with the many servers that copy its API (vLLM, TEI,
llama.cpp, Ollama, LiteLLM...). Throttling and outages are retried with exponential
backoff and full jitter, honouring ``Retry-After`` (``cogsub.openai_http``); everything
else fails fast with the server's own explanation. The API key goes into the
``Authorization`` header and nowhere else: it is scrubbed from every message, log
event and ``repr``.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx
import numpy as np

from cogsub.core.errors import ConfigurationError, FieldProblem, InvalidInputError
from cogsub.openai_http import Backoff, OpenAICompatibleEndpoint, ServerAnswer, wrong_settings

__all__ = ["OpenAIEmbedder"]

# OpenAI caps one request at 2048 inputs.
_MAX_BATCH = 2048
# Client errors caused by the texts themselves; other 4xx mean wrong settings.
_INPUT_STATUSES = frozenset({400, 413, 422})
# Most servers reject an empty string; a single space embeds as "nothing".
_EMPTY_STAND_IN = " "


def _refuse(answer: ServerAnswer) -> Exception:
    if answer.status in _INPUT_STATUSES:
        return InvalidInputError([FieldProblem("input", answer.message)])
    return wrong_settings(answer)


class OpenAIEmbedder:
    """Embedder over an OpenAI-compatible ``/v1/embeddings`` endpoint.

    Args:
        base_url: Server root, with or without the trailing ``/v1``.
        model: Model name sent in every request (also the embedder's ``name``).
        api_key: Sent as ``Authorization: Bearer``; never logged nor shown.
        dimension: Expected vector length; any other length is a ConfigurationError.
        batch_size: Texts per request (1-2048).
        timeout_s: Per-request timeout (connect, read, write and pool).
        max_retries: Retries after the first attempt on 408, 409, 429, 5xx,
            timeouts and connection errors (batches are sent one after another).
        backoff_base_s: First backoff ceiling; it doubles per retry (full jitter).
        backoff_max_s: Cap on one backoff and on an honoured ``Retry-After``.

    Raises:
        UnavailableError: (from ``embed``) the server stayed unreachable or
            throttling through every retry.
        ConfigurationError: (from ``embed``) wrong URL, key, model or dimension,
            or an answer that is not OpenAI-compatible.
        InvalidInputError: (from ``embed``) the server rejected the texts.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        dimension: int,
        batch_size: int = 128,
        timeout_s: float = 30.0,
        max_retries: int = 5,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
    ) -> None:
        if dimension < 1:
            raise ConfigurationError(f"embedding dimension must be at least 1, got {dimension}")
        if not 1 <= batch_size <= _MAX_BATCH:
            raise ConfigurationError(f"batch_size must be within 1-{_MAX_BATCH}, got {batch_size}")
        if max_retries < 0 or timeout_s <= 0:
            raise ConfigurationError("max_retries must be >= 0 and timeout_s > 0")
        root = base_url.rstrip("/")
        self._url = f"{root}/embeddings" if root.endswith("/v1") else f"{root}/v1/embeddings"
        self._model = model
        self._dimension = dimension
        self._batch_size = batch_size
        self._endpoint = OpenAICompatibleEndpoint(
            self._url,
            what="embedding",
            api_key=api_key,
            timeout_s=timeout_s,
            backoff=Backoff(max_retries + 1, backoff_base_s, backoff_max_s),
            retry_event="embedding_request_retrying",
        )

    @property
    def name(self) -> str:
        """The model name sent to the server."""
        return self._model

    @property
    def dimension(self) -> int:
        """Length of every vector (checked on each response)."""
        return self._dimension

    @property
    def url(self) -> str:
        """The full embeddings endpoint URL."""
        return self._url

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, in order, ``batch_size`` texts per request."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            batch = [text or _EMPTY_STAND_IN for text in texts[start : start + self._batch_size]]
            vectors.extend(await self._embed_batch(batch))
        return vectors

    async def close(self) -> None:
        """Close the HTTP connection pool."""
        await self._endpoint.close()

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        payload = {"model": self._model, "input": batch}
        response = await self._endpoint.post(payload, refuse=_refuse)
        return self._parse(response, expected=len(batch))

    def _parse(self, response: httpx.Response, *, expected: int) -> list[list[float]]:
        try:
            items = response.json()["data"]
            ordered = sorted(items, key=lambda item: int(item["index"]))
            rows = [item["embedding"] for item in ordered]
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigurationError(
                f"{self._url} did not answer in the OpenAI embeddings format ({type(exc).__name__})"
            ) from exc
        if len(rows) != expected:
            raise ConfigurationError(
                f"{self._url} returned {len(rows)} vectors for {expected} texts"
            )
        for row in rows:
            if not isinstance(row, list) or len(row) != self._dimension:
                got = len(row) if isinstance(row, list) else type(row).__name__
                raise ConfigurationError(
                    f"model {self._model!r} at {self._url} returned a vector of length {got}, "
                    f"configured dimension is {self._dimension}"
                )
        try:
            matrix = np.asarray(rows, dtype=np.float64)
        except (ValueError, TypeError) as exc:
            raise ConfigurationError(f"{self._url} returned non-numeric vectors") from exc
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        if not np.all(np.isfinite(norms)) or np.any(norms == 0.0):
            raise ConfigurationError(f"{self._url} returned a zero or non-finite vector")
        result: list[list[float]] = (matrix / norms).tolist()
        return result

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(url={self._url!r}, model={self._model!r}, dim={self._dimension})"
