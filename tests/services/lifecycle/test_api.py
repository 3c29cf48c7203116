"""The lifecycle routes of the real app: forget, forget a bank (confirmed), export, import."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from cogsub.api import ApiKeys, ApiLimits, create_app
from cogsub.core.errors import UnavailableError
from cogsub.lifecycle import Lifecycle
from tests.services.api.conftest import assert_error
from tests.services.consolidation.stack import NOW, ConsolidationStack, consolidation_stack
from tests.services.lifecycle.scenario import BANK, OTHER, SECRET, Populated, populate

KEY = "key-for-jane-0123456789"
OTHER_KEY = "key-for-omar-0123456789"
Client = Callable[..., httpx.AsyncClient]


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[ConsolidationStack]:
    async with consolidation_stack(tmp_path) as running:
        yield running


@pytest.fixture
async def bank(stack: ConsolidationStack) -> Populated:
    return await populate(stack)


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    opened: list[httpx.AsyncClient] = []

    def make(
        stack: ConsolidationStack,
        *,
        key: str | None = KEY,
        keys: bool = True,
        wired: bool = True,
        max_body_bytes: int = 4 * 1_048_576,
        headers: dict[str, str] | None = None,
    ) -> httpx.AsyncClient:
        app = create_app(
            service=stack.service,
            auth=ApiKeys({KEY: [BANK], OTHER_KEY: [OTHER]}) if keys else None,
            limits=ApiLimits(max_body_bytes=max_body_bytes),
            lifecycle=Lifecycle(archive=stack.archive, index=stack.index, clock=lambda: NOW)
            if wired
            else None,
        )
        sent = dict(headers or {})
        if key is not None:
            sent["Authorization"] = f"Bearer {key}"
        made = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://api", headers=sent
        )
        opened.append(made)
        return made

    yield make
    for made in opened:
        await made.aclose()


async def test_delete_a_memory_forgets_it_and_names_the_key_in_the_audit(
    stack: ConsolidationStack, bank: Populated, client: Client
) -> None:
    api = client(stack)
    response = await api.delete(f"/v1/banks/{BANK}/memories/{bank.turn}")
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["forgotten"][0] == bank.turn and set(bank.facts) <= set(report["forgotten"])
    recalled = await api.post(f"/v1/banks/{BANK}/recall", json={"query": SECRET, "k": 50})
    assert bank.turn not in {h["id"] for h in recalled.json()["results"]}
    assert (await api.get(f"/v1/banks/{BANK}/memories/{bank.turn}")).status_code == 404
    record = json.loads(await stack.archive.get(report["audit_key"]))
    assert record["actor"] == "key:" + hashlib.sha256(KEY.encode()).hexdigest()[:12]
    again = await api.delete(f"/v1/banks/{BANK}/memories/{bank.turn}")
    assert_error(again, 404, "not_found")


async def test_another_banks_memory_is_404_or_403_and_stays(
    stack: ConsolidationStack, bank: Populated, client: Client
) -> None:
    api = client(stack)
    assert_error(await api.delete(f"/v1/banks/{BANK}/memories/{bank.other_turn}"), 404, "not_found")
    assert_error(
        await api.delete(f"/v1/banks/{OTHER}/memories/{bank.other_turn}"), 403, "forbidden"
    )
    assert_error(await api.delete(f"/v1/banks/{OTHER}?confirm={OTHER}"), 403, "forbidden")
    assert await stack.index.get(OTHER, bank.other_turn) is not None
    assert_error(await api.delete(f"/v1/banks/{BANK}/memories/a..b"), 422, "invalid_input")


async def test_forgetting_a_bank_needs_its_id_as_confirmation(
    stack: ConsolidationStack, bank: Populated, client: Client
) -> None:
    api = client(stack)
    for suffix in ("", f"?confirm={OTHER}"):
        error = assert_error(await api.delete(f"/v1/banks/{BANK}{suffix}"), 422, "invalid_input")
        assert error["problems"][0]["field"] == "confirm"
        assert BANK in error["problems"][0]["rule"]
    assert await stack.index.count(BANK) > 0
    response = await api.delete(f"/v1/banks/{BANK}", params={"confirm": BANK})
    assert response.status_code == 200, response.text
    assert response.json()["complete"] is True and response.json()["index_documents"] > 10
    assert await stack.index.count(BANK) == 0
    assert await stack.index.get(OTHER, bank.other_turn) is not None


async def test_export_streams_lines_that_import_into_a_fresh_stack(
    stack: ConsolidationStack, bank: Populated, client: Client, tmp_path: Path
) -> None:
    api = client(stack)
    async with api.stream("GET", f"/v1/banks/{BANK}/export") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [line async for line in response.aiter_lines() if line]
    assert json.loads(lines[0])["bank_id"] == BANK and json.loads(lines[-1])["end"] is True
    async with consolidation_stack(tmp_path / "fresh") as fresh:
        target = client(fresh)
        body = "\n".join(lines).encode()
        imported = await target.post(
            f"/v1/banks/{BANK}/import",
            content=body,
            headers={"Content-Type": "application/x-ndjson"},
        )
        assert imported.status_code == 200, imported.text
        report = imported.json()
        assert report["complete"] and report["imported"] == len(lines) - 2
        assert await fresh.index.get(BANK, bank.procedure_v2) is not None
        wrong = await client(fresh, key=OTHER_KEY).post(f"/v1/banks/{OTHER}/import", content=body)
        error = assert_error(wrong, 422, "invalid_input")
        assert "another bank" in error["message"]
        small = client(fresh, max_body_bytes=1_000)
        assert_error(
            await small.post(f"/v1/banks/{BANK}/import", content=body), 413, "payload_too_large"
        )


async def test_without_keys_the_declared_actor_is_recorded(
    stack: ConsolidationStack, bank: Populated, client: Client
) -> None:
    api = client(stack, key=None, keys=False, headers={"X-Cogsub-Actor": "sdk-embedded"})
    response = await api.delete(f"/v1/banks/{BANK}/memories/{bank.merged_turn}")
    assert response.status_code == 200
    record = json.loads(await stack.archive.get(response.json()["audit_key"]))
    assert record["actor"] == "sdk-embedded"
    odd = client(stack, key=None, keys=False, headers={"X-Cogsub-Actor": "a b/c"})
    response = await odd.delete(f"/v1/banks/{BANK}/memories/{bank.drain}")
    assert json.loads(await stack.archive.get(response.json()["audit_key"]))["actor"] == "anonymous"


async def test_an_app_without_lifecycle_answers_503(
    stack: ConsolidationStack, client: Client
) -> None:
    api = client(stack, wired=False)
    response = await api.delete(f"/v1/banks/{BANK}/memories/x")
    assert_error(response, 503, "unavailable")
    assert_error(await api.get(f"/v1/banks/{BANK}/export"), 503, "unavailable")


class DownArchive:
    """An archive whose listing fails: the store is briefly down."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    async def list(self, prefix: str = "") -> AsyncIterator[str]:
        raise UnavailableError("archive down")
        yield prefix  # pragma: no cover - makes this an async generator


async def test_an_export_that_cannot_start_is_503_not_a_broken_stream(
    stack: ConsolidationStack,
) -> None:
    app = create_app(
        service=stack.service,
        auth=None,
        limits=ApiLimits(),
        lifecycle=Lifecycle(archive=DownArchive(stack.archive), index=stack.index),  # type: ignore[arg-type]
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
        response = await api.get(f"/v1/banks/{BANK}/export")
    assert_error(response, 503, "unavailable")
