"""Update: a new version that supersedes the old one, through the API over a live stack.

The old version stays readable by id and in history; recall returns the new
one; the archive keeps both objects untouched plus a supersession record.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cogsub.api import ApiKeys, ApiLimits, create_app
from cogsub.archive.filesystem import FilesystemArchive
from cogsub.bus.sqlite import SqliteEventBus
from cogsub.core.derived import supersession_key
from cogsub.core.documents import IndexDocument
from cogsub.core.errors import ConflictError, InvalidInputError, UnavailableError
from cogsub.core.events import ArchivedEvent, FactType
from cogsub.core.history import MemoryUpdate
from cogsub.core.memory import RetainRequest
from cogsub.embeddings.hash import HashEmbedder
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.ingestion import IngestionWorker
from cogsub.lifecycle.update import (
    MemoryUpdater,
    new_version_id,
    new_version_request,
    user_tags,
)
from cogsub.recall import MemoryService
from tests.services.api.conftest import assert_error
from tests.services.recall.stack import LiveStack, live_stack

BANK = "ana"
OTHER = "ben"
KEY = "key-for-ana-0123456789"
OTHER_KEY = "key-for-ben-0123456789"


@pytest.fixture
async def stack(data_dir: Path) -> AsyncIterator[LiveStack]:
    async with live_stack(data_dir) as running:
        yield running


@pytest.fixture
async def api(stack: LiveStack) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(
        service=stack.service,
        auth=ApiKeys({KEY: [BANK], OTHER_KEY: [OTHER]}),
        limits=ApiLimits(max_body_bytes=1_048_576),
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://api",
        headers={"Authorization": f"Bearer {KEY}"},
    ) as client:
        yield client


async def posted(api: httpx.AsyncClient, path: str, body: dict[str, Any]) -> str:
    response = await api.post(f"/v1/banks/{BANK}/{path}", json={**body, "wait": True})
    assert response.status_code == 201, response.text
    return str(response.json()["memory_id"])


async def recalled(api: httpx.AsyncClient, query: str, **fields: Any) -> list[dict[str, Any]]:
    response = await api.post(
        f"/v1/banks/{BANK}/recall", json={"query": query, "reinforce": False, **fields}
    )
    assert response.status_code == 200, response.text
    return list(response.json()["results"])


async def test_an_update_supersedes_the_old_text_which_stays_readable(
    stack: LiveStack, api: httpx.AsyncClient
) -> None:
    old = await posted(
        api, "preferences", {"text": "Ana likes tea in the morning.", "tags": ["drinks"]}
    )
    response = await api.put(
        f"/v1/banks/{BANK}/memories/{old}",
        json={"content": "Ana likes coffee in the morning.", "wait": True},
    )
    assert response.status_code == 201, response.text
    new = response.json()
    assert new["fact_type"] == "preference" and new["memory_id"] != old
    assert response.headers["Location"] == f"/v1/banks/{BANK}/memories/{new['memory_id']}"

    hits = await recalled(api, "what does Ana like in the morning")
    assert [h["id"] for h in hits] == [new["memory_id"]]
    assert hits[0]["tags"][:1] == ["drinks"]  # the caller's tags carry over
    both = await recalled(api, "what does Ana like in the morning", all_versions=True)
    assert {h["id"] for h in both} == {old, new["memory_id"]}

    kept = await api.get(f"/v1/banks/{BANK}/memories/{old}")
    assert kept.status_code == 200 and kept.json()["text"] == "Ana likes tea in the morning."
    record = await stack.archive.get(supersession_key(BANK, old))
    assert b'"rule": "update"' in record and new["memory_id"].encode() in record

    history = (await api.get(f"/v1/banks/{BANK}/memories/{old}/history")).json()
    assert [v["memory_id"] for v in history["versions"]] == [old, new["memory_id"]]
    assert [v["current"] for v in history["versions"]] == [False, True]
    assert history["superseded_by"]["rule"] == "update"
    newer = (await api.get(f"/v1/banks/{BANK}/memories/{new['memory_id']}/history")).json()
    assert [s["memory_id"] for s in newer["supersedes"]] == [old]
    assert [v["memory_id"] for v in newer["versions"]] == [old, new["memory_id"]]

    listed = (await api.get(f"/v1/banks/{BANK}/memories")).json()["memories"]
    assert [m["id"] for m in listed] == [new["memory_id"]]
    every = (await api.get(f"/v1/banks/{BANK}/memories?include_superseded=true")).json()
    assert {m["id"] for m in every["memories"]} == {old, new["memory_id"]}


async def test_updating_twice_makes_a_line_of_three_and_only_the_newest_may_change(
    api: httpx.AsyncClient,
) -> None:
    v1 = await posted(api, "memories", {"content": "The office is in Porto.", "fact_type": "world"})
    put = f"/v1/banks/{BANK}/memories/{{}}"
    v2 = (
        await api.put(put.format(v1), json={"content": "The office is in Braga.", "wait": True})
    ).json()
    v3 = (
        await api.put(
            put.format(v2["memory_id"]), json={"content": "The office is in Faro.", "wait": True}
        )
    ).json()
    line = (await api.get(f"/v1/banks/{BANK}/memories/{v2['memory_id']}/history")).json()
    assert [v["memory_id"] for v in line["versions"]] == [v1, v2["memory_id"], v3["memory_id"]]
    assert [v["version"] for v in line["versions"]] == [1, 2, 3]
    stale = await api.put(put.format(v1), json={"content": "The office is in Lisbon."})
    error = assert_error(stale, 409, "conflict")
    assert v2["memory_id"] in error["message"]
    assert [h["id"] for h in await recalled(api, "where is the office")] == [v3["memory_id"]]


async def test_a_procedure_update_is_its_next_version(api: httpx.AsyncClient) -> None:
    steps = ["make build", "kubectl apply -f prod.yaml"]
    v1 = await posted(api, "procedures", {"steps": steps, "rationale": "prod deploy"})
    response = await api.put(
        f"/v1/banks/{BANK}/memories/{v1}",
        json={"steps": [*steps, "curl /health"], "wait": True},
    )
    assert response.status_code == 201, response.text
    v2 = response.json()
    assert v2["version"] == 2 and v2["fact_type"] == "procedure"
    (hit,) = await recalled(api, "how do I deploy to prod", types=["procedure"])
    assert (hit["id"], hit["steps"], hit["rationale"]) == (
        v2["memory_id"],
        [*steps, "curl /health"],
        "prod deploy",  # carried over
    )
    history = (await api.get(f"/v1/banks/{BANK}/memories/{v1}/history")).json()
    assert [(v["memory_id"], v["version"]) for v in history["versions"]] == [
        (v1, 1),
        (v2["memory_id"], 2),
    ]
    wrong = await api.put(f"/v1/banks/{BANK}/memories/{v2['memory_id']}", json={"content": "x"})
    assert assert_error(wrong, 422, "invalid_input")["problems"][0]["field"] == "steps"


async def test_bad_updates_are_refused_before_anything_is_written(
    stack: LiveStack, api: httpx.AsyncClient
) -> None:
    old = await posted(api, "memories", {"content": "Ben lives in Oslo.", "fact_type": "world"})
    route = f"/v1/banks/{BANK}/memories/{old}"
    same = await api.put(route, json={"content": "ben lives in  oslo."})
    assert assert_error(same, 422, "invalid_input")["problems"][0]["field"] == "content"
    steps = await api.put(route, json={"steps": ["a"]})
    assert assert_error(steps, 422, "invalid_input")["problems"][0]["field"] == "content"
    empty = await api.put(route, json={})
    assert assert_error(empty, 422, "invalid_input")["problems"][0]["field"] == "content"
    assert_error(
        await api.put(f"/v1/banks/{BANK}/memories/nope", json={"content": "y"}), 404, "not_found"
    )
    assert_error(
        await api.put(f"/v1/banks/{OTHER}/memories/{old}", json={"content": "y"}), 403, "forbidden"
    )
    assert await stack.index.count(BANK) == 1
    assert not await stack.archive.exists(supersession_key(BANK, old))


async def test_the_same_update_sent_twice_makes_one_new_version(api: httpx.AsyncClient) -> None:
    old = await posted(api, "reasonings", {"text": "Cache misses explain the latency."})
    body = {"content": "GC pauses explain the latency.", "wait": True}
    first = await api.put(f"/v1/banks/{BANK}/memories/{old}", json=body)
    again = await api.put(f"/v1/banks/{BANK}/memories/{old}", json=body)
    assert first.status_code == again.status_code == 201, again.text
    assert again.json()["memory_id"] == first.json()["memory_id"]
    other = await api.put(f"/v1/banks/{BANK}/memories/{old}", json={"content": "Disk I/O does."})
    assert first.json()["memory_id"] in assert_error(other, 409, "conflict")["message"]
    listed = (await api.get(f"/v1/banks/{BANK}/memories?include_superseded=true")).json()
    assert sorted(m["id"] for m in listed["memories"]) == sorted([old, first.json()["memory_id"]])


async def test_concurrent_updates_of_one_memory_leave_one_winner_and_409_the_rest(
    stack: LiveStack, api: httpx.AsyncClient
) -> None:
    old = await posted(api, "memories", {"content": "Lunch is on Friday.", "fact_type": "world"})
    route = f"/v1/banks/{BANK}/memories/{old}"
    answers = await asyncio.gather(
        *(
            api.put(route, json={"content": f"Lunch moved to day {n}.", "wait": True})
            for n in range(4)
        )
    )
    assert sorted(a.status_code for a in answers) == [201, 409, 409, 409], [a.text for a in answers]
    (won,) = [a.json()["memory_id"] for a in answers if a.status_code == 201]
    for lost in (a for a in answers if a.status_code == 409):
        assert won in assert_error(lost, 409, "conflict")["message"]
    listed = (await api.get(f"/v1/banks/{BANK}/memories")).json()["memories"]
    assert [m["id"] for m in listed] == [won]
    assert await stack.index.count(BANK) == 2  # the losers' versions were never retained


@pytest.mark.parametrize("wait", [False, True])
async def test_an_update_links_both_versions_as_soon_as_it_answers(
    api: httpx.AsyncClient, wait: bool
) -> None:
    old = await posted(api, "memories", {"content": "On-call starts Monday.", "fact_type": "world"})
    response = await api.put(
        f"/v1/banks/{BANK}/memories/{old}",
        json={"content": "On-call starts Tuesday.", "wait": wait},
    )
    assert response.status_code == 201, response.text
    new = response.json()["memory_id"]
    history = (await api.get(f"/v1/banks/{BANK}/memories/{new}/history")).json()
    assert [v["memory_id"] for v in history["versions"]] == [old, new]
    assert [s["memory_id"] for s in history["supersedes"]] == [old]
    assert [h["id"] for h in await recalled(api, "when does on-call start")] == [new]


async def test_an_update_whose_new_version_is_refused_leaves_the_old_one_live(
    stack: LiveStack, api: httpx.AsyncClient
) -> None:
    old = await posted(api, "memories", {"content": "Standup is at nine.", "fact_type": "world"})
    taken = await posted(api, "memories", {"content": "Billing is Jane's.", "fact_type": "world"})
    response = await api.put(
        f"/v1/banks/{BANK}/memories/{old}",
        json={"content": "Standup is at ten.", "memory_id": taken, "wait": True},
    )
    assert taken in assert_error(response, 409, "conflict")["message"]
    assert not await stack.archive.exists(supersession_key(BANK, old))
    kept = (await api.get(f"/v1/banks/{BANK}/memories/{old}/history")).json()
    assert kept["superseded_by"] is None and not kept["signals"]["superseded"]
    other = (await api.get(f"/v1/banks/{BANK}/memories/{taken}")).json()
    assert other["text"] == "Billing is Jane's." and not any(
        "supersedes:" in t for t in other["tags"]
    )
    assert old in [h["id"] for h in await recalled(api, "when is standup")]


async def test_a_procedure_version_retained_with_supersedes_hides_the_one_before(
    api: httpx.AsyncClient,
) -> None:
    v1 = await posted(api, "procedures", {"steps": ["make build", "deploy"], "rationale": "std"})
    steps = ["make build", "drain", "deploy"]
    v2 = await posted(api, "procedures", {"steps": steps, "supersedes": v1})
    route = f"/v1/banks/{BANK}/memories"
    listed = (await api.get(route, params={"types": "procedure"})).json()["memories"]
    assert [m["id"] for m in listed] == [v2]
    every = await api.get(route, params={"types": "procedure", "include_superseded": "true"})
    assert {m["id"] for m in every.json()["memories"]} == {v1, v2}
    old = (await api.get(f"{route}/{v1}/history")).json()
    assert old["superseded_by"]["superseded_by"] == v2 and old["signals"]["superseded"]
    new = (await api.get(f"{route}/{v2}/history")).json()
    assert new["superseded_by"] is None and not new["signals"]["superseded"]


async def test_a_new_version_not_indexed_in_time_is_503_and_the_same_update_finishes_it(
    data_dir: Path,
) -> None:
    bus, archive = SqliteEventBus(data_dir / "bus.sqlite3"), FilesystemArchive(data_dir / "archive")
    index, embedder = SqliteMemoryIndex(data_dir / "index.sqlite3"), HashEmbedder()
    worker = IngestionWorker(
        bus=bus, archive=archive, index=index, embedder=embedder, poll_timeout_s=0.02
    )
    await worker.prepare()
    service = MemoryService(
        bus=bus, archive=archive, index=index, embedder=embedder, wait_timeout_s=0.3
    )
    updater = MemoryUpdater(service)

    async def ingesting() -> tuple[asyncio.Event, asyncio.Task[None]]:
        stop = asyncio.Event()
        return stop, asyncio.create_task(worker.run(stop))

    try:
        stop, running = await ingesting()
        request = RetainRequest(content="Deploys freeze on Fridays.", fact_type="world", wait=True)
        old = (await service.retain(BANK, request)).memory_id
        stop.set()
        await running
        change = MemoryUpdate(content="Deploys freeze on Thursdays.")
        with pytest.raises(UnavailableError) as late:
            await updater.update(BANK, old, change)
        pending = new_version_id(BANK, old, "Deploys freeze on Thursdays.")
        assert pending in str(late.value)
        kept = await index.get(BANK, old)
        assert kept is not None and not any(t.startswith("superseded-by:") for t in kept.tags)
        with pytest.raises(ConflictError, match=pending):
            await updater.update(BANK, old, MemoryUpdate(content="Deploys never freeze."))

        stop, running = await ingesting()
        done = await updater.update(BANK, old, change)
        assert done.memory_id == pending and done.recallable
        kept = await index.get(BANK, old)
        assert kept is not None and f"superseded-by:{pending}" in kept.tags
        stop.set()
        await running
    finally:
        await service.drain()
        await index.close()
        await archive.close()
        await bus.close()


# -- the pure part --------------------------------------------------------------------------------


def _old(
    fact_type: FactType | None, tags: list[str], structured: dict[str, Any] | None
) -> tuple[IndexDocument, ArchivedEvent]:
    event = ArchivedEvent.model_validate(
        {
            "eventId": "m1",
            "timestamp": "2026-03-01T00:00:00.000Z",
            "type": "user_input",
            "bankId": BANK,
            "context": {"sessionId": "s-1"},
            "input": {"text": "old text", **({"structured": structured} if structured else {})},
            "tags": tags,
            "objectStorageKey": "events/x.json",
            **({"factType": fact_type.value} if fact_type else {}),
        }
    )
    doc = IndexDocument(
        event_id="m1",
        timestamp="2026-03-01T00:00:00.000Z",
        event_type="user_input",
        session_id="s-1",
        summary="old text",
        embedding=[1.0],
        importance_score=0.5,
        reward_score=0.5,
        confidence=0.5,
        object_storage_key="events/x.json",
        tags=tags,
        bank_id=BANK,
        fact_type=fact_type,
    )
    return doc, event


def test_a_new_version_request_keeps_the_caller_s_tags_and_context_and_drops_system_tags() -> None:
    doc, event = _old(FactType.WORLD, ["home", "superseded-by:x", "proof:2", "supersedes:y"], None)
    request = new_version_request(BANK, doc, event, MemoryUpdate(content="new text"))
    assert request.tags == ["home"] and request.context.session_id == "s-1"
    assert request.fact_type is FactType.WORLD and request.supersedes is None
    assert request.memory_id == new_version_id(BANK, "m1", "new text")
    assert request.memory_id != new_version_id(BANK, "m1", "newer text")
    chosen = new_version_request(
        BANK, doc, event, MemoryUpdate(content="n", memory_id="v2", tags=["t"])
    )
    assert (chosen.memory_id, chosen.tags) == ("v2", ["t"])
    assert user_tags(["procedure:p", "version:2", "derived:fact", "tier:1", "cluster:c", "a"]) == [
        "a"
    ]


def test_a_procedure_s_new_version_needs_steps_and_names_the_old_one() -> None:
    doc, event = _old(
        FactType.PROCEDURE,
        ["procedure:m1", "version:1"],
        {"steps": ["a"], "rationale": "why", "procedureId": "m1", "version": 1},
    )
    request = new_version_request(BANK, doc, event, MemoryUpdate(steps=["a", "b"]))
    assert request.supersedes == "m1" and request.steps == ["a", "b"]
    assert request.content == "1. a\n2. b\nRationale: why" and request.tags == []
    with pytest.raises(InvalidInputError) as refused:
        new_version_request(BANK, doc, event, MemoryUpdate(content="text"))
    assert refused.value.problems[0].field == "steps"


def test_an_update_that_changes_nothing_is_refused() -> None:
    doc, event = _old(None, [], None)
    with pytest.raises(InvalidInputError) as refused:
        new_version_request(BANK, doc, event, MemoryUpdate(content="  OLD   text "))
    assert refused.value.problems[0].field == "content"
