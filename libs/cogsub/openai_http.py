"""One JSON endpoint of an OpenAI-compatible server, called with retries.

Shared by the embedder (``/v1/embeddings``) and the LLM extractor
(``/chat/completions``): both talk to the same family of servers (OpenAI, vLLM,
TEI, llama.cpp, Ollama, LiteLLM...), which throttle, fail and explain themselves
the same way. Throttling and outages (408, 409, 429, 5xx, timeouts, refused or
reset connections) are retried with capped exponential backoff and full jitter,
honouring ``retry-after-ms`` and ``Retry-After``; any other error answer is handed
to the caller's ``refuse`` to become the right domain error. The API key goes into
the ``Authorization`` header only and is scrubbed from every message and log event.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import structlog

from cogsub.core.errors import ConfigurationError, UnavailableError

__all__ = [
    "Backoff",
    "OpenAICompatibleEndpoint",
    "RetryableStatus",
    "ServerAnswer",
    "UnusableReply",
    "is_retryable_status",
    "reply_content",
    "retry_after_s",
    "server_explanation",
    "wrong_settings",
]

_log = structlog.get_logger(__name__)

# Worth another try: throttling, request timeout and lock conflicts (5xx come on top).
_RETRY_STATUSES = frozenset({408, 409, 429})
# Error bodies can be whole HTML pages; the start says what went wrong.
_MAX_EXPLANATION = 500


def is_retryable_status(status: int) -> bool:
    """Whether an error answer may succeed if the same request is sent again."""
    return status in _RETRY_STATUSES or status >= 500


def retry_after_s(headers: httpx.Headers, now: float) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (OpenAI) or ``Retry-After`` (RFC 9110).

    ``now`` is the current Unix time, against which an HTTP-date is read.
    """
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
    return max(0.0, when.timestamp() - now)


def server_explanation(response: httpx.Response) -> tuple[str, str | None]:
    """The server's own message and error code (``{"error": {"message", "code"}}`` or text)."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:_MAX_EXPLANATION], None
    error = body.get("error", body.get("detail", body)) if isinstance(body, dict) else None
    if isinstance(error, dict):
        message, code = error.get("message"), error.get("code")
        text = message if isinstance(message, str) else response.text
        return text[:_MAX_EXPLANATION], code if isinstance(code, str) else None
    if isinstance(error, str):
        return error[:_MAX_EXPLANATION], None
    return response.text[:_MAX_EXPLANATION], None


@dataclass(frozen=True)
class Backoff:
    """How often and how long to wait: ``attempts`` in all, retries included.

    The n-th retry waits a random time up to ``base_s · 2**(n-1)``, capped at ``max_s``;
    a server's ``Retry-After`` replaces the draw but is capped too.
    """

    attempts: int
    base_s: float
    max_s: float

    def delay(
        self,
        retry: int,
        retry_after: float | None,
        draw: Callable[[float, float], float] = random.uniform,
    ) -> float:
        """Seconds before retry number ``retry`` (1 for the first)."""
        if retry_after is not None:
            return min(retry_after, self.max_s)
        ceiling = min(self.max_s, self.base_s * 2 ** (retry - 1))
        # Full jitter: spreads the retries of many workers hit by the same outage.
        return draw(0.0, ceiling)


@dataclass(frozen=True)
class ServerAnswer:
    """An error answer that is not worth retrying; ``message`` is redacted."""

    status: int
    message: str
    code: str | None


class RetryableStatus(UnavailableError):
    """A 408/409/429 or 5xx answer; ``retry_after`` is the server's hint in seconds."""

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def wrong_settings(answer: ServerAnswer) -> Exception:
    """The usual reading of a 4xx: the URL, key or model is wrong."""
    return ConfigurationError(f"{answer.message} (check the URL, API key and model)")


@contextmanager
def _map_httpx_errors(what: str, url: str) -> Iterator[None]:
    """Turn httpx transport failures (timeouts, refused or reset connections) into ours."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise UnavailableError(f"{what} request to {url} timed out ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise UnavailableError(
            f"{what} request to {url} failed: {type(exc).__name__}: {exc}"
        ) from exc


class OpenAICompatibleEndpoint:
    """POSTs JSON to one URL, retrying what may pass later, refusing the rest.

    Args:
        url: The full endpoint URL.
        what: Names the endpoint in messages (``"embedding"``, ``"chat"``).
        api_key: Sent as ``Authorization: Bearer``; never logged nor shown.
        timeout_s: Per-attempt timeout (connect, read, write and pool).
        backoff: Attempts and waits between them.
        retry_event: The log event written before each retry.
        client: An ``httpx.AsyncClient`` to share; its owner closes it. Without one
            the endpoint opens its own and ``close`` releases it.
    """

    def __init__(
        self,
        url: str,
        *,
        what: str,
        api_key: str | None,
        timeout_s: float,
        backoff: Backoff,
        retry_event: str,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = url
        self._what = what
        self._api_key = api_key or None
        self._timeout = httpx.Timeout(timeout_s)
        self._backoff = backoff
        self._retry_event = retry_event
        self._owns_client = client is None
        self._client = client if client is not None else httpx.AsyncClient()
        # httpx.Headers, not a dict: its repr masks the key wherever it is printed
        # (a traceback renderer showing the locals of httpx's own frames, a debugger).
        self._headers = httpx.Headers({"Authorization": f"Bearer {api_key}"} if api_key else {})

    async def post(
        self,
        payload: dict[str, Any],
        *,
        refuse: Callable[[ServerAnswer], Exception] = wrong_settings,
        **log_fields: object,
    ) -> httpx.Response:
        """The first successful answer; ``log_fields`` go into every retry log event.

        Raises:
            UnavailableError: every attempt was throttled, failed or timed out.
            Exception: whatever ``refuse`` makes of an error answer not worth retrying.
        """
        attempts = self._backoff.attempts
        for attempt in range(1, attempts + 1):
            try:
                return await self._post_once(payload, refuse)
            except UnavailableError as exc:
                reason = self.redact(str(exc))
                if attempt == attempts:
                    raise UnavailableError(f"{reason} (gave up after {attempt} attempts)") from exc
                hint = exc.retry_after if isinstance(exc, RetryableStatus) else None
                delay = self._backoff.delay(attempt, hint)
                _log.warning(
                    self._retry_event,
                    **log_fields,
                    url=self.url,
                    attempt=attempt,
                    delay_s=round(delay, 3),
                    reason=reason,
                )
                await asyncio.sleep(delay)
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    def redact(self, text: str) -> str:
        """``text`` without the API key."""
        # Servers echo a rejected key back ("Incorrect API key provided: sk-...").
        return text.replace(self._api_key, "[redacted]") if self._api_key else text

    async def close(self) -> None:
        """Close the HTTP connection pool, unless it was handed in."""
        if self._owns_client:
            await self._client.aclose()

    async def _post_once(
        self, payload: dict[str, Any], refuse: Callable[[ServerAnswer], Exception]
    ) -> httpx.Response:
        with _map_httpx_errors(self._what, self.url):
            response = await self._client.post(
                self.url, json=payload, headers=self._headers, timeout=self._timeout
            )
        status = response.status_code
        if status < 400:
            return response
        explanation, code = server_explanation(response)
        message = f"{self._what} server answered {status}: {self.redact(explanation)}"
        if is_retryable_status(status):
            raise RetryableStatus(message, retry_after_s(response.headers, time.time()))
        raise refuse(ServerAnswer(status, message, code))


# Servers that ignore response_format often wrap the JSON in a code fence.
_FENCE = re.compile(r"^```(?:json)?\s*(?P<body>.*?)\s*```$", re.S)


class UnusableReply(Exception):
    """A chat completion whose output cannot be used; the message says why."""


def reply_content(response: httpx.Response) -> str:
    """The text of a chat completion's first choice, out of any code fence.

    Raises:
        ConfigurationError: the answer is not a chat completion (wrong URL or server).
        UnusableReply: the model refused, was cut short or filtered, or said nothing.
    """
    try:
        choice = response.json()["choices"][0]
        message = choice["message"]
        finish_reason = choice.get("finish_reason")
        content = message.get("content")
        refusal = message.get("refusal")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ConfigurationError(
            f"{response.request.url} did not answer with a chat completion ({type(exc).__name__})"
        ) from exc
    if refusal:
        raise UnusableReply(f"the model refused: {str(refusal)[:200]}")
    if finish_reason == "length":
        raise UnusableReply("the model's output was cut short (finish_reason=length)")
    if finish_reason == "content_filter":
        raise UnusableReply("the model's output was withheld by a content filter")
    if not isinstance(content, str) or not content.strip():
        raise UnusableReply("the model returned no content")
    fenced = _FENCE.match(content.strip())
    return fenced["body"] if fenced is not None else content.strip()
