"""The I/O-free half of the clients: building requests, refusing bad arguments, reading errors."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from cogsub.core.errors import (
    CogsubError,
    ConflictError,
    FieldProblem,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)
from cogsub.sdk import AuthenticationError, MemoryClient, PermissionDeniedError, ServerError
from cogsub.sdk._base import _BaseClient
from cogsub.sdk._errors import error_for

NO_FILTERS: dict[str, Any] = {
    "tags": None,
    "since": None,
    "until": None,
    "prefer_observations": False,
    "session_id": None,
    "all_versions": False,
}
NO_OPTIONS: dict[str, Any] = {"tags": None, "memory_id": None, "wait": False}


def _error_body(kind: str, message: str, problems: list[dict[str, str]] | None = None) -> bytes:
    return json.dumps(
        {"error": {"type": kind, "message": message, "problems": problems or []}}
    ).encode()


def test_retain_builds_the_request_the_api_expects():
    base = _BaseClient("http://api/")
    call = base._retain_call(
        "user@example.com",
        "Acme HQ is in Berlin.",
        "world",
        ["acme"],
        "2026-05-08T22:31:25Z",
        {"session_id": "s-1"},
        memory_id="m-1",
        wait=True,
    )
    assert call.method == "POST"
    assert call.path == "/v1/banks/user%40example.com/memories"
    assert call.json == {
        "content": "Acme HQ is in Berlin.",
        "fact_type": "world",
        "tags": ["acme"],
        "timestamp": "2026-05-08T22:31:25Z",
        "context": {"session_id": "s-1"},
        "memory_id": "m-1",
        "wait": True,
    }


def test_typed_helpers_and_recall_choose_their_routes():
    base = _BaseClient("http://api")
    procedure = base._procedure_call(
        "b", ["make build"], "why", supersedes="m-0", tags=None, memory_id=None, wait=False
    )
    assert (procedure.method, procedure.path) == ("POST", "/v1/banks/b/procedures")
    assert procedure.json == {
        "steps": ["make build"],
        "tags": [],
        "wait": False,
        "rationale": "why",
        "supersedes": "m-0",
    }
    profile = base._text_block_call(
        "profile", "b", "admin on AWS", tags=None, memory_id=None, wait=True
    )
    assert (profile.method, profile.path) == ("PUT", "/v1/banks/b/profile")
    assert profile.json == {"text": "admin on AWS", "tags": [], "wait": True}
    recall = base._recall_call("b", "deploy", "procedure", 3, 100, **NO_FILTERS)
    assert recall.path == "/v1/banks/b/recall"
    assert recall.json is not None and recall.json["types"] == ["procedure"]
    assert recall.json["k"] == 3 and recall.json["max_tokens"] == 100
    get = base._get_memory_call("b", "mem:1")
    assert (get.method, get.path) == ("GET", "/v1/banks/b/memories/mem%3A1")


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda b: b._recall_call("b", "", None, 10, None, **NO_FILTERS), "query"),
        (lambda b: b._recall_call("b", "q", ["nope"], 10, None, **NO_FILTERS), "types.0"),
        (lambda b: b._recall_call("b", "q", None, 101, None, **NO_FILTERS), "k"),
        (
            lambda b: b._retain_call(
                "a/../b", "x", None, None, None, None, memory_id=None, wait=False
            ),
            "bank_id",
        ),
        (lambda b: b._get_memory_call("b", "../etc"), "memory_id"),
        (lambda b: b._procedure_call("b", [], None, supersedes=None, **NO_OPTIONS), "steps"),
        (lambda b: b._procedure_call("b", "make", None, supersedes=None, **NO_OPTIONS), "steps"),
        (
            lambda b: b._retain_call(
                "b", "x", None, None, "yesterday", None, memory_id=None, wait=False
            ),
            "timestamp",
        ),
    ],
)
def test_bad_arguments_fail_before_sending(build, field):
    with pytest.raises(InvalidInputError) as caught:
        build(_BaseClient("http://api"))
    assert caught.value.problems[0].field == field


def test_nothing_is_sent_for_a_bad_argument():
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    transport = httpx.MockTransport(answer)
    with MemoryClient("http://api", transport=transport) as client:
        with pytest.raises(InvalidInputError):
            client.recall("bank", "q", k=0)
        with pytest.raises(InvalidInputError):
            client.get_memory("bad/bank", "m")
    assert sent == []


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, AuthenticationError),
        (403, PermissionDeniedError),
        (404, NotFoundError),
        (409, ConflictError),
        (503, UnavailableError),
        (502, UnavailableError),
        (500, ServerError),
        (418, CogsubError),
    ],
)
def test_errors_map_back_to_domain_errors_with_the_server_message(status, kind):
    error = error_for(status, _error_body("x", "what the server said"))
    assert type(error) is kind
    assert str(error) == "what the server said"
    assert error.retryable is (kind is UnavailableError)


def test_invalid_input_keeps_every_field_and_rule():
    body = _error_body(
        "invalid_input",
        "query: too short; k: too small",
        [{"field": "query", "rule": "too short"}, {"field": "k", "rule": "too small"}],
    )
    error = error_for(422, body)
    assert isinstance(error, InvalidInputError)
    assert error.problems == (FieldProblem("query", "too short"), FieldProblem("k", "too small"))
    assert str(error) == "query: too short; k: too small"
    too_big = error_for(413, _error_body("payload_too_large", "over 1024 bytes"))
    assert isinstance(too_big, InvalidInputError) and str(too_big) == "over 1024 bytes"


def test_an_answer_that_is_not_ours_still_maps_by_status():
    error = error_for(503, b"<html>bad gateway</html>")
    assert isinstance(error, UnavailableError) and str(error) == "HTTP 503"


def test_connection_failures_are_unavailable():
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    client = MemoryClient("http://api", transport=httpx.MockTransport(refuse))
    with client, pytest.raises(UnavailableError, match="cannot reach"):
        client.recall("bank", "q")


def test_the_key_is_sent_as_a_bearer_token_and_never_shown():
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"])
        return httpx.Response(404, content=_error_body("not_found", "no memory"))

    client = MemoryClient("http://api", api_key="k" * 32, transport=httpx.MockTransport(answer))
    with client, pytest.raises(NotFoundError):
        client.get_memory("bank", "m")
    assert seen == ["Bearer " + "k" * 32]
    assert "k" * 32 not in repr(client)
