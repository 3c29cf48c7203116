"""The pure parts of the shared OpenAI-compatible client: statuses, hints, explanations, waits.

The retry loop itself runs against real local servers in tests/libs/embeddings and
tests/libs/extraction.
"""

from __future__ import annotations

import email.utils
import json

import httpx
import pytest

import cogsub.openai_http
from cogsub.core.errors import ConfigurationError
from cogsub.openai_http import (
    Backoff,
    ServerAnswer,
    UnusableReply,
    is_retryable_status,
    reply_content,
    retry_after_s,
    server_explanation,
    wrong_settings,
)

NOW = 1_700_000_000.0


def test_public_names_are_pinned() -> None:
    assert cogsub.openai_http.__all__ == [
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


def _completion(message: dict[str, object], finish_reason: str = "stop") -> httpx.Response:
    body = {"choices": [{"message": message, "finish_reason": finish_reason}]}
    return httpx.Response(200, json=body, request=httpx.Request("POST", "http://127.0.0.1/v1"))


def test_a_reply_is_its_first_choice_out_of_any_code_fence() -> None:
    assert reply_content(_completion({"content": ' {"a": 1} '})) == '{"a": 1}'
    assert reply_content(_completion({"content": '```json\n{"a": 1}\n```'})) == '{"a": 1}'


@pytest.mark.parametrize(
    ("message", "finish_reason", "why"),
    [
        ({"content": "x", "refusal": "no"}, "stop", "refused"),
        ({"content": '{"a"'}, "length", "cut short"),
        ({"content": "x"}, "content_filter", "content filter"),
        ({"content": "  "}, "stop", "no content"),
        ({"content": None}, "stop", "no content"),
    ],
)
def test_an_unusable_reply_says_why(
    message: dict[str, object], finish_reason: str, why: str
) -> None:
    with pytest.raises(UnusableReply, match=why):
        reply_content(_completion(message, finish_reason))


def test_an_answer_that_is_no_chat_completion_is_a_settings_error() -> None:
    response = httpx.Response(200, json={"data": []}, request=httpx.Request("GET", "http://h/x"))
    with pytest.raises(ConfigurationError, match="did not answer with a chat completion"):
        reply_content(response)


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 599])
def test_throttling_conflicts_and_outages_are_retried(status: int) -> None:
    assert is_retryable_status(status)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_other_client_errors_are_not(status: int) -> None:
    assert not is_retryable_status(status)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({}, None),
        ({"Retry-After": "7"}, 7.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"Retry-After": "-3"}, 0.0),
        ({"Retry-After": "soon"}, None),
        ({"retry-after-ms": "250", "Retry-After": "30"}, 0.25),
        ({"retry-after-ms": "lots", "Retry-After": "30"}, 30.0),
        ({"Retry-After": email.utils.formatdate(NOW + 42, usegmt=True)}, 42.0),
        ({"Retry-After": email.utils.formatdate(NOW - 42, usegmt=True)}, 0.0),
    ],
)
def test_retry_after_reads_milliseconds_seconds_and_dates(
    headers: dict[str, str], seconds: float | None
) -> None:
    assert retry_after_s(httpx.Headers(headers), NOW) == seconds


def _answer(status: int, body: object) -> httpx.Response:
    content = body if isinstance(body, str) else json.dumps(body)
    return httpx.Response(status, content=content.encode())


@pytest.mark.parametrize(
    ("body", "explanation"),
    [
        (
            {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}},
            ("Rate limit reached", "rate_limit_exceeded"),
        ),
        ({"error": {"message": "no code", "code": 17}}, ("no code", None)),
        ({"detail": "Not Found"}, ("Not Found", None)),
        ({"error": "model not loaded"}, ("model not loaded", None)),
        ("<html>Bad Gateway</html>", ("<html>Bad Gateway</html>", None)),
        ([1, 2], ("[1, 2]", None)),
    ],
)
def test_the_server_explains_itself_in_any_of_the_usual_shapes(
    body: object, explanation: tuple[str, str | None]
) -> None:
    assert server_explanation(_answer(400, body)) == explanation


def test_an_explanation_is_cut_to_its_start() -> None:
    message, _ = server_explanation(_answer(502, "x" * 10_000))
    assert message == "x" * 500


def test_a_server_hint_replaces_the_draw_but_is_capped() -> None:
    backoff = Backoff(attempts=5, base_s=0.5, max_s=20.0)
    assert backoff.delay(1, retry_after=3.0) == 3.0
    assert backoff.delay(1, retry_after=3600.0) == 20.0


def test_the_ceiling_doubles_per_retry_up_to_the_cap() -> None:
    backoff = Backoff(attempts=9, base_s=0.5, max_s=5.0)
    highest = [backoff.delay(n, None, draw=lambda low, high: high) for n in range(1, 7)]
    assert highest == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert backoff.delay(3, None, draw=lambda low, high: low) == 0.0


def test_an_unretried_error_reads_as_wrong_settings() -> None:
    error = wrong_settings(ServerAnswer(401, "chat server answered 401: bad key", None))
    assert isinstance(error, ConfigurationError)
    assert "bad key" in str(error) and "check the URL" in str(error)
