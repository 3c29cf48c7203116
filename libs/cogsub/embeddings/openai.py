"""Embeddings from any OpenAI-compatible HTTP endpoint (``POST /v1/embeddings``).

Works with OpenAI itself and with the many servers that copy its API (vLLM, TEI,
llama.cpp, Ollama, LiteLLM...). Throttling and outages are retried with exponential
backoff and full jitter, honouring ``Retry-After``; everything else fails fast with
the server's own explanation. The API key goes into the ``Authorization`` header and
nowhere else: it is scrubbed from every message, log event and ``repr``.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import httpx
import numpy as np
import structlog

from cogsub.core.errors import (
    ConfigurationError,
    FieldProblem,
    InvalidInputError,
    UnavailableError,
)

__all__ = ["OpenAIEmbedder"]

_log = structlog.get_logger(__name__)

# OpenAI caps one request at 2048 inputs.
_MAX_BATCH = 2048
# Worth another try: throttling, request timeout and lock conflicts (5xx come on top).
_RETRY_STATUSES = frozenset({408, 409, 429})
# Client errors caused by the texts themselves; other 4xx mean wrong settings.
_INPUT_STATUSES = frozenset({400, 413, 422})
# Most servers reject an empty string; a single space embeds as "nothing".
_EMPTY_STAND_IN = " "


class _RetryableStatus(UnavailableError):
    """A 408/409/429 or 5xx answer; ``retry_after`` is the server's hint in seconds."""

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@contextmanager
def _map_httpx_errors(url: str) -> Iterator[None]:
    """Turn httpx transport failures (timeouts, refused or reset connections) into ours."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise UnavailableError(
            f"embedding request to {url} timed out ({type(exc).__name__})"
        ) from exc
    except httpx.TransportError as exc:
        raise UnavailableError(
            f"embedding request to {url} failed: {type(exc).__name__}: {exc}"
        ) from exc


def _parse_retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (OpenAI) or ``Retry-After`` (RFC 9110)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _server_message(response: httpx.Response) -> str:
    """The human explanation in an error body (``{"error": {"message": ...}}`` or text)."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:500]
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body))
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return response.text[:500]


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
        self._api_key = api_key or None
        self._dimension = dimension
        self._batch_size = batch_size
        self._max_retries = max_retries
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), headers=headers)

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
        await self._client.aclose()

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        payload = {"model": self._model, "input": batch}
        for attempt in range(self._max_retries + 1):
            try:
                response = await self._post(payload)
            except UnavailableError as exc:
                if attempt == self._max_retries:
                    raise UnavailableError(
                        f"{self._redact(str(exc))} (gave up after {attempt + 1} attempts)"
                    ) from exc
                hint = exc.retry_after if isinstance(exc, _RetryableStatus) else None
                delay = self._delay(attempt, hint)
                _log.warning(
                    "embedding_request_retrying",
                    url=self._url,
                    attempt=attempt + 1,
                    delay_s=round(delay, 3),
                    reason=self._redact(str(exc)),
                )
                await asyncio.sleep(delay)
                continue
            return self._parse(response, expected=len(batch))
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    async def _post(self, payload: dict[str, Any]) -> httpx.Response:
        with _map_httpx_errors(self._url):
            response = await self._client.post(self._url, json=payload)
        status = response.status_code
        if status < 400:
            return response
        message = f"embedding server answered {status}: {self._redact(_server_message(response))}"
        if status in _RETRY_STATUSES or status >= 500:
            raise _RetryableStatus(message, _parse_retry_after(response.headers))
        if status in _INPUT_STATUSES:
            raise InvalidInputError([FieldProblem("input", message)])
        raise ConfigurationError(f"{message} (check the URL, API key and model)")

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self._backoff_max_s)
        ceiling = min(self._backoff_max_s, self._backoff_base_s * 2**attempt)
        # Full jitter: spreads the retries of many workers hit by the same outage.
        return random.uniform(0.0, ceiling)

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

    def _redact(self, text: str) -> str:
        # Servers echo a rejected key back ("Incorrect API key provided: sk-...").
        return text.replace(self._api_key, "[redacted]") if self._api_key else text

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(url={self._url!r}, model={self._model!r}, dim={self._dimension})"
