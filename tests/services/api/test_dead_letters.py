"""A rejected retain answers at once, and operators list, show and retry dead letters.

The app is wired by ``running_api`` exactly as ``cogsub run`` wires it (embedded
stack, live ingestion worker, hash embedder), and reached through ASGITransport.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cogsub.api import ApiKeys, ApiLimits, create_app
from cogsub.core.topics import EXPERIENCE_RAW, EXPERIENCE_RAW_DLQ
from cogsub.deadletters.desk import DeadLetterDesk
from cogsub.deadletters.letters import RETRIED_FROM_HEADER, Position
from cogsub.ingestion.pipeline import DLQ_KIND_HEADER, DLQ_REASON_HEADER, DLQ_SOURCE_HEADER
from cogsub.runtime.wiring import RunningApi, embedded_settings, running_api
from tests.services.api.conftest import KEY_A, KEY_ALL, assert_error
from tests.services.api.rejections import occupy_key, retain_body

# The service waits up to 10 s for a memory to become recallable; a rejection is
# known long before that.
PROMPT_S = 5.0


@dataclass
class Api:
    running: RunningApi
    client: httpx.AsyncClient


@pytest.fixture
async def api(data_dir: Path) -> AsyncIterator[Api]:
    settings = embedded_settings(data_dir, embedder="hash")
    async with running_api(settings, with_worker=True) as running:
        transport = httpx.ASGITransport(app=running.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            yield Api(running, client)


async def _rejected_retain(api: Api, bank: str, memory_id: str, content: str) -> httpx.Response:
    await occupy_key(api.running.stack.archive, bank, memory_id, content)
    return await api.client.post(f"/v1/banks/{bank}/memories", json=retain_body(memory_id, content))


async def test_a_dead_lettered_retain_with_wait_answers_its_rejection_at_once(
    api: Api, unique_name: str
) -> None:
    started = time.monotonic()
    response = await _rejected_retain(api, unique_name, "invoice-7", "Invoice 7 is paid.")
    took = time.monotonic() - started

    error = assert_error(response, 409, "rejected")
    assert "conflict" in error["message"] and "already archived" in error["message"]
    assert f"[dead letter {EXPERIENCE_RAW_DLQ}:" in error["message"]
    assert took < PROMPT_S, f"answered after {took:.1f} s, as if it had only been slow"
    missing = await api.client.get(f"/v1/banks/{unique_name}/memories/invoice-7")
    assert missing.status_code == 404


async def test_an_accepted_retain_with_wait_is_still_201(api: Api, unique_name: str) -> None:
    response = await api.client.post(
        f"/v1/banks/{unique_name}/memories", json=retain_body("fine-1", "Acme HQ is in Berlin.")
    )
    assert response.status_code == 201, response.text
    assert response.json()["recallable"] is True


async def test_operator_lists_shows_and_retries_a_dead_letter_after_the_fix(
    api: Api, unique_name: str
) -> None:
    content = "The staging server IP is 10.0.0.5."
    key = await occupy_key(api.running.stack.archive, unique_name, "ip-1", content)
    await api.client.post(f"/v1/banks/{unique_name}/memories", json=retain_body("ip-1", content))

    listed = await api.client.get("/v1/dead-letters")
    assert listed.status_code == 200, listed.text
    page = listed.json()
    assert page["next"] is None
    (letter,) = page["dead_letters"]
    assert (letter["kind"], letter["bank_id"], letter["event_id"]) == (
        "conflict",
        unique_name,
        "ip-1",
    )
    assert letter["topic"] == EXPERIENCE_RAW_DLQ and letter["source"].startswith(EXPERIENCE_RAW)
    assert json.loads(letter["value_text"])["input"]["text"] == content
    assert letter["id"] == f"{letter['topic']}:{letter['partition']}:{letter['offset']}"

    shown = await api.client.get(f"/v1/dead-letters/{letter['id']}")
    assert shown.status_code == 200 and shown.json() == letter

    await api.running.stack.archive.delete(key)  # the operator's fix: the squatter goes
    retried = await api.client.post(f"/v1/dead-letters/{letter['id']}/retry")
    assert retried.status_code == 200, retried.text
    target = Position.parse(retried.json()["republished_to"])
    assert target.topic == EXPERIENCE_RAW
    (record,) = await api.running.stack.bus.read(
        target.topic, target.partition, offset=target.offset, max_records=1
    )
    assert record.value.decode() == letter["value_text"]  # the original bytes
    assert record.header(RETRIED_FROM_HEADER) == letter["id"].encode()
    assert record.header(DLQ_KIND_HEADER) is None

    memory = await _eventually_found(api, f"/v1/banks/{unique_name}/memories/ip-1")
    assert memory["text"] == content
    still = (await api.client.get("/v1/dead-letters")).json()["dead_letters"]
    assert [d["id"] for d in still] == [letter["id"]]  # a topic is append-only


async def _eventually_found(api: Api, path: str) -> dict[str, object]:
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        response = await api.client.get(path)
        if response.status_code == 200:
            found: dict[str, object] = response.json()
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path} never became readable")


async def test_pages_go_through_every_letter_once(api: Api) -> None:
    bus = api.running.stack.bus
    for i in range(7):
        await bus.publish(
            EXPERIENCE_RAW_DLQ,
            f'{{"eventId": "e{i}"}}'.encode(),
            key=f"e{i}".encode(),
            headers={DLQ_KIND_HEADER: b"invalid", DLQ_REASON_HEADER: b"because"},
        )
    seen: list[str] = []
    after: str | None = None
    for _ in range(10):
        params = {"limit": 3, **({"after": after} if after else {})}
        page = (await api.client.get("/v1/dead-letters", params=params)).json()
        seen += [d["event_id"] for d in page["dead_letters"]]
        after = page["next"]
        if after is None:
            break
    assert sorted(seen) == [f"e{i}" for i in range(7)]
    only = await api.client.get("/v1/dead-letters", params={"topic": "consolidation.dlq"})
    assert only.json() == {"dead_letters": [], "next": None}


async def test_bad_requests_name_what_is_wrong(api: Api) -> None:
    bus = api.running.stack.bus
    sourceless = await bus.publish(EXPERIENCE_RAW_DLQ, b"{}", headers={DLQ_KIND_HEADER: b"x"})
    refused = await api.client.post(
        f"/v1/dead-letters/{EXPERIENCE_RAW_DLQ}:{sourceless.partition}:{sourceless.offset}/retry"
    )
    assert_error(refused, 422, "invalid_input")
    assert refused.json()["error"]["problems"][0]["field"] == "id"

    elsewhere = await api.client.get(f"/v1/dead-letters/{EXPERIENCE_RAW}:0:0")
    assert_error(elsewhere, 422, "invalid_input")
    assert elsewhere.json()["error"]["problems"][0]["field"] == "topic"
    absent = await api.client.get(f"/v1/dead-letters/{EXPERIENCE_RAW_DLQ}:0:999")
    assert_error(absent, 404, "not_found")
    cursor = await api.client.get("/v1/dead-letters", params={"after": "nonsense"})
    assert cursor.json()["error"]["problems"][0]["field"] == "after"


async def test_with_keys_only_a_key_for_every_bank_sees_dead_letters(
    api: Api, unique_name: str
) -> None:
    bus = api.running.stack.bus
    await bus.publish(
        EXPERIENCE_RAW_DLQ,
        b'{"eventId": "private", "bankId": "someone-else"}',
        headers={DLQ_SOURCE_HEADER: b"experience.raw/0/0", DLQ_KIND_HEADER: b"invalid"},
    )
    app = create_app(
        service=api.running.service,
        auth=ApiKeys({KEY_A: [unique_name], KEY_ALL: ["*"]}),
        limits=ApiLimits(),
        dead_letter_desk=DeadLetterDesk(bus),
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        assert_error(await client.get("/v1/dead-letters"), 401, "unauthenticated")
        bank_key = {"Authorization": f"Bearer {KEY_A}"}
        assert_error(await client.get("/v1/dead-letters", headers=bank_key), 403, "forbidden")
        retry = await client.post(
            f"/v1/dead-letters/{EXPERIENCE_RAW_DLQ}:0:0/retry", headers=bank_key
        )
        assert_error(retry, 403, "forbidden")
        operator = {"Authorization": f"Bearer {KEY_ALL}"}
        page = (await client.get("/v1/dead-letters", headers=operator)).json()
        assert [d["event_id"] for d in page["dead_letters"]] == ["private"]
