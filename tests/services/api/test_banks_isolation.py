"""Bank isolation of the browsing routes as a property, through the real app with keys.

Banks whose names differ only by case hold memories under the same ids, with
overlapping texts, tags and times. Hypothesis then draws a key, a route (list
banks, list memories with random filters, history, update) and a bank and an id
of any bank, and checks: a key lists only banks it grants; another bank's route
is 403 whatever the id; inside its own bank a key never sees, traces or changes
a memory of another bank (their archive keys never appear in an answer, and an
update of an id the bank does not hold is 404 and writes nothing).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cogsub.api import ApiKeys, ApiLimits, create_app
from cogsub.core.events import FactType
from cogsub.core.memory import RetainRequest
from tests.services.recall.stack import LiveStack, live_stack

BANKS = ["alpha", "Alpha", "beta.1", "gamma"]
KEYS = {f"key-{n}-for-isolation-0123": [bank] for n, bank in enumerate(BANKS)}
KEYS["key-two-banks-isolation-0123"] = ["alpha", "gamma"]
SHARED_IDS = ["invoice-7", "shared", "m:1"]
TAGS = ["ops", "billing", "' OR 1=1 --"]
START = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Corpus:
    stack: LiveStack
    api: httpx.AsyncClient
    keys: dict[str, list[str]]
    objects: dict[str, dict[str, str]]  # bank -> memory id -> archive key


@pytest.fixture
async def corpus(data_dir: Path) -> AsyncIterator[Corpus]:
    async with live_stack(data_dir) as stack:
        objects: dict[str, dict[str, str]] = {}
        for n, bank in enumerate(BANKS):
            for m, memory_id in enumerate([*SHARED_IDS, f"own-{n}"]):
                request = RetainRequest(
                    content=f"billing note {m} about ops, kept in {bank}",
                    fact_type=[FactType.WORLD, FactType.PREFERENCE, None][m % 3],
                    tags=TAGS[: m % 3 + 1],
                    timestamp=START + timedelta(hours=m),
                    memory_id=memory_id,
                    wait=True,
                )
                result = await stack.service.retain(bank, request)
                objects.setdefault(bank, {})[memory_id] = result.object_storage_key
        app = create_app(
            service=stack.service, auth=ApiKeys(KEYS), limits=ApiLimits(max_body_bytes=65_536)
        )
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://api"
        ) as api:
            yield Corpus(stack, api, KEYS, objects)


def foreign_keys(corpus: Corpus, bank: str) -> set[str]:
    """The archive keys of every other bank's memories: none may appear in ``bank``'s answers."""
    return {key for other, kept in corpus.objects.items() if other != bank for key in kept.values()}


def assert_no_foreign(corpus: Corpus, bank: str, response: httpx.Response) -> None:
    for key in foreign_keys(corpus, bank):
        assert key not in response.text, f"{bank} answered with {key}"


listing_params = st.fixed_dictionaries(
    {},
    optional={
        "types": st.lists(st.sampled_from([t.value for t in FactType]), min_size=1).map(",".join),
        "tags": st.sampled_from(TAGS),
        "limit": st.integers(min_value=1, max_value=5),
        "include_superseded": st.booleans(),
        "since": st.just((START + timedelta(hours=1)).isoformat()),
    },
)
every_id = sorted({i for bank in range(len(BANKS)) for i in [*SHARED_IDS, f"own-{bank}"]})


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    key=st.sampled_from(sorted(KEYS)),
    route=st.sampled_from(["banks", "list", "history", "update"]),
    bank=st.sampled_from([*BANKS, "ALPHA", "delta"]),
    memory_id=st.sampled_from(every_id),
    params=listing_params,
)
async def test_a_key_lists_reads_and_updates_only_its_banks(
    corpus: Corpus, key: str, route: str, bank: str, memory_id: str, params: dict[str, Any]
) -> None:
    granted = corpus.keys[key]
    headers = {"Authorization": f"Bearer {key}"}
    if route == "banks":
        response = await corpus.api.get("/v1/banks", headers=headers)
        assert response.status_code == 200, response.text
        assert [b["bank_id"] for b in response.json()["banks"]] == sorted(granted)
        return
    path = f"/v1/banks/{bank}/memories"
    if route == "list":
        response = await corpus.api.get(path, params=params, headers=headers)
    elif route == "history":
        response = await corpus.api.get(f"{path}/{memory_id}/history", headers=headers)
    else:
        elsewhere = await tags_elsewhere(corpus, bank, memory_id)
        body = {"content": f"rewritten {memory_id}"}
        response = await corpus.api.put(f"{path}/{memory_id}", json=body, headers=headers)
    if bank not in granted:
        assert response.status_code == 403, response.text
        return
    assert_no_foreign(corpus, bank, response)
    own = corpus.objects.get(bank, {})
    if route == "list":
        assert response.status_code == 200, response.text
        for memory in response.json()["memories"]:
            assert memory["bank_id"] == bank
            assert memory["object_storage_key"] == own[memory["id"]]
    elif memory_id not in own:
        assert response.status_code == 404, response.text
    elif route == "history":
        assert response.status_code == 200, response.text
        assert response.json()["memory"]["object_storage_key"] == own[memory_id]
    else:
        await check_update(corpus, bank, memory_id, response, elsewhere)


async def tags_elsewhere(corpus: Corpus, bank: str, memory_id: str) -> dict[str, list[str]]:
    """The tags of ``memory_id`` in every other bank holding it (an update must not touch them)."""
    found = {}
    for other in corpus.objects:
        if other != bank and memory_id in corpus.objects[other]:
            doc = await corpus.stack.index.get(other, memory_id)
            assert doc is not None
            found[other] = list(doc.tags)
    return found


async def check_update(
    corpus: Corpus,
    bank: str,
    memory_id: str,
    response: httpx.Response,
    elsewhere: dict[str, list[str]],
) -> None:
    """An update inside the bank changes that bank alone: the same id elsewhere is untouched
    (it may carry an earlier example's update of its own bank, which this one must not change)."""
    if response.status_code == 409:  # updated by an earlier example: only the newest may change
        assert "superseded" in response.json()["error"]["message"]
        return
    assert response.status_code in (201, 202), response.text
    new_id = response.json()["memory_id"]
    assert response.json()["bank_id"] == bank
    corpus.objects[bank][new_id] = response.json()["object_storage_key"]
    assert await tags_elsewhere(corpus, bank, memory_id) == elsewhere
    record = await corpus.stack.archive.get(f"consolidation/{bank}/supersessions/{memory_id}.json")
    assert json.loads(record)["supersededBy"] == new_id


async def test_updates_of_one_id_in_banks_differing_by_case_stay_apart(corpus: Corpus) -> None:
    both, upper = "key-two-banks-isolation-0123", "key-1-for-isolation-0123"
    path = "/v1/banks/{}/memories/invoice-7"

    def bearer(key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    first = await corpus.api.put(
        path.format("alpha"), json={"content": "lower"}, headers=bearer(both)
    )
    assert first.status_code in (201, 202), first.text
    after_first = await tags_elsewhere(corpus, "Alpha", "invoice-7")
    second = await corpus.api.put(
        path.format("Alpha"), json={"content": "upper"}, headers=bearer(upper)
    )
    assert second.status_code in (201, 202), second.text
    assert await tags_elsewhere(corpus, "Alpha", "invoice-7") == after_first
    upper_doc = await corpus.stack.index.get("Alpha", "invoice-7")
    assert upper_doc is not None and any(t.startswith("superseded-by:") for t in upper_doc.tags)
    lower_doc = await corpus.stack.index.get("alpha", "invoice-7")
    lower_by = [t for t in lower_doc.tags if t.startswith("superseded-by:")] if lower_doc else []
    assert lower_by == [f"superseded-by:{first.json()['memory_id']}"]
