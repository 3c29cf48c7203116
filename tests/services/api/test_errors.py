"""Error answers: JSON bodies with field and rule, sizes, crashes, unavailable backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from cogsub.archive.filesystem import FilesystemArchive
from cogsub.bus.sqlite import SqliteEventBus
from cogsub.core.memory import RecallRequest, RecallResponse
from cogsub.embeddings.hash import HashEmbedder
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.recall import MemoryService
from tests.services.api.conftest import KEY_ALL, SMALL_BODY, AppClient, assert_error


async def test_bad_fields_name_the_field_and_the_rule(app_client: AppClient, unique_name: str):
    api = app_client()
    response = await api.post(
        f"/v1/banks/{unique_name}/recall", json={"query": "", "k": 0, "types": ["nonsense"]}
    )
    error = assert_error(response, 422, "invalid_input")
    problems = {p["field"]: p["rule"] for p in error["problems"]}
    assert set(problems) == {"query", "k", "types.0"}
    assert "at least 1 character" in problems["query"]
    assert "greater than or equal to 1" in problems["k"]


async def test_unknown_fields_are_refused_by_name(app_client: AppClient, unique_name: str):
    api = app_client()
    response = await api.post(
        f"/v1/banks/{unique_name}/memories", json={"content": "x", "bank_id": "someone-else"}
    )
    error = assert_error(response, 422, "invalid_input")
    assert error["problems"] == [{"field": "bank_id", "rule": "Extra inputs are not permitted"}]


async def test_broken_json_is_422_naming_the_body(app_client: AppClient, unique_name: str):
    response = await app_client().post(
        f"/v1/banks/{unique_name}/recall",
        content=b'{"query": ',
        headers={"Content-Type": "application/json"},
    )
    error = assert_error(response, 422, "invalid_input")
    assert error["problems"][0]["field"] == "(body)"
    assert error["problems"][0]["rule"].startswith("must be valid JSON")


@pytest.mark.parametrize(
    "body",
    [
        b'{"query": "caf\xe9"}',  # Latin-1, not UTF-8
        b'{"query": "x", "k": ' + b"7" * 5_000 + b"}",  # past Python's int digit limit
        b'{"a":' * 5_000 + b"1" + b"}" * 5_000,  # deeper than the decoder recurses
    ],
    ids=["not-utf8", "huge-number", "too-deep"],
)
async def test_a_body_that_cannot_be_decoded_is_400_naming_the_rule(
    app_client: AppClient, unique_name: str, body: bytes
):
    api = app_client(max_body_bytes=65_536)
    response = await api.post(
        f"/v1/banks/{unique_name}/recall",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    error = assert_error(response, 400, "bad_request")
    (problem,) = error["problems"]
    assert problem["field"] == "(body)" and "UTF-8" in problem["rule"]
    assert error["message"] == f"(body): {problem['rule']}"


async def test_bad_ids_in_the_path_are_422(app_client: AppClient, unique_name: str):
    api = app_client()
    bad_memory = await api.get(f"/v1/banks/{unique_name}/memories/..%2Fescape")
    assert bad_memory.status_code in (404, 422)  # a decoded '/' may not even match a route
    dotted = await api.get(f"/v1/banks/{unique_name}/memories/a..b")
    error = assert_error(dotted, 422, "invalid_input")
    assert error["problems"][0]["field"] == "memory_id"
    bank = await api.post("/v1/banks/-bad-bank/recall", json={"query": "x"})
    error = assert_error(bank, 422, "invalid_input")
    assert error["problems"][0]["field"] == "bank_id"


async def test_a_composed_procedure_over_the_text_limit_is_422(
    app_client: AppClient, unique_name: str
):
    api = app_client(max_body_bytes=1_048_576)
    steps = ["s" * 2_000] * 20  # each step is fine; the stored text would be over 32 KiB
    response = await api.post(f"/v1/banks/{unique_name}/procedures", json={"steps": steps})
    error = assert_error(response, 422, "invalid_input")
    assert error["problems"][0]["field"] == "content"


async def test_a_declared_body_over_the_limit_is_413_before_anything_runs(
    app_client: AppClient, unique_name: str, stack, keys
):
    api = app_client()
    body = {"content": "x" * (SMALL_BODY + 10), "memory_id": "too-big"}
    response = await api.post(f"/v1/banks/{unique_name}/memories", json=body)
    assert_error(response, 413, "payload_too_large")
    assert await stack.index.get(unique_name, "too-big") is None
    # Refused even before authentication: no key is needed to learn the limit.
    keyed = app_client(auth=keys)
    refused = await keyed.post(f"/v1/banks/{unique_name}/recall", content=b"y" * (SMALL_BODY + 1))
    assert_error(refused, 413, "payload_too_large")


async def test_a_streamed_body_over_the_limit_is_413(app_client: AppClient, unique_name: str):
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b" " * 1_000  # no Content-Length: the total is only known while reading

    response = await app_client().post(
        f"/v1/banks/{unique_name}/recall",
        content=chunks(),
        headers={"Content-Type": "application/json"},
    )
    assert "content-length" not in {k.lower() for k in response.request.headers}
    assert_error(response, 413, "payload_too_large")


async def test_a_streamed_body_under_the_limit_is_served(app_client: AppClient, unique_name: str):
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"query": '
        yield b'"anything"}'

    response = await app_client().post(
        f"/v1/banks/{unique_name}/recall",
        content=chunks(),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 200 and response.json()["results"] == []


async def test_unknown_routes_and_methods_are_json(app_client: AppClient):
    api = app_client()
    assert_error(await api.get("/v1/nothing"), 404, "not_found")
    assert_error(await api.delete("/healthz"), 405, "method_not_allowed")


class _CrashingService(MemoryService):
    async def recall(self, bank_id: str, request: RecallRequest) -> RecallResponse:
        raise RuntimeError("secret internal detail /var/lib/cogsub")


async def test_an_unexpected_crash_is_a_json_500_without_details(
    app_client: AppClient, unique_name: str, stack, tmp_path: Path, capsys, keys
):
    archive = FilesystemArchive(tmp_path / "unused")
    service = _CrashingService(
        bus=stack.bus, archive=archive, index=stack.index, embedder=HashEmbedder()
    )
    try:
        response = await app_client(service=service, auth=keys, key=KEY_ALL).post(
            f"/v1/banks/{unique_name}/recall", json={"query": "x"}
        )
    finally:
        await archive.close()
    error = assert_error(response, 500, "internal")
    assert "secret" not in response.text and "/var/lib" not in response.text
    assert "RuntimeError" not in str(error["message"])
    logged = capsys.readouterr()
    assert "api_request_crashed" in logged.out + logged.err  # the server log has the details
    assert "secret internal detail" in logged.out + logged.err
    assert KEY_ALL not in logged.out + logged.err  # but never the caller's key


async def test_a_closed_event_log_is_503_with_retry_after(tmp_path: Path, unique_name: str):
    from cogsub.api import ApiLimits, create_app

    bus = SqliteEventBus(tmp_path / "bus.sqlite3")
    archive = FilesystemArchive(tmp_path / "archive")
    index = SqliteMemoryIndex(tmp_path / "index.sqlite3")
    service = MemoryService(bus=bus, archive=archive, index=index, embedder=HashEmbedder())
    app = create_app(service=service, auth=None, limits=ApiLimits())
    await bus.close()  # the log is down: a retain cannot be made durable now
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://api"
        ) as api:
            response = await api.post(f"/v1/banks/{unique_name}/memories", json={"content": "x"})
    finally:
        await index.close()
        await archive.close()
    assert_error(response, 503, "unavailable")
    assert int(response.headers["retry-after"]) >= 1
