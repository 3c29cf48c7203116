"""Browsing through the real app over a live stack: bank summaries and memory pages.

The paging property drives retains and forgets between the pages of a walk and
checks that every memory present for the whole walk is listed exactly once.
"""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cogsub.api import ApiKeys
from cogsub.core.events import FactType
from cogsub.core.listing import ListingKey, encode_cursor
from cogsub.core.memory import RetainRequest
from cogsub.lifecycle.forget import Forgetting
from tests.services.api.conftest import KEY_A, KEY_ALL, AppClient, assert_error
from tests.services.recall.stack import LiveStack

START = datetime(2026, 3, 1, tzinfo=UTC)
_banks = itertools.count()


async def keep(stack: LiveStack, bank: str, memory_id: str, minutes: int, **fields: Any) -> None:
    request = RetainRequest(
        content=f"memory {memory_id} of {bank}",
        memory_id=memory_id,
        timestamp=START + timedelta(minutes=minutes),
        wait=True,
        **fields,
    )
    assert (await stack.service.retain(bank, request)).recallable


async def walk(api: httpx.AsyncClient, bank: str, **params: Any) -> list[dict[str, Any]]:
    """Every page of the bank's memories, following ``next_cursor``."""
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        asked = {**params, **({"cursor": cursor} if cursor else {})}
        response = await api.get(f"/v1/banks/{bank}/memories", params=asked)
        assert response.status_code == 200, response.text
        page = response.json()
        seen += page["memories"]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen


async def test_memories_come_newest_first_a_page_at_a_time(
    stack: LiveStack, app_client: AppClient, banks: tuple[str, str]
) -> None:
    bank, other = banks
    for n, minutes in enumerate([5, 1, 9, 9, 3]):
        await keep(stack, bank, f"m{n}", minutes)
    await keep(stack, other, "m0", 20)
    api = app_client()
    first = (await api.get(f"/v1/banks/{bank}/memories", params={"limit": 2})).json()
    assert [m["id"] for m in first["memories"]] == ["m3", "m2"]  # a tie: the id decides
    assert first["next_cursor"] is not None
    seen = await walk(api, bank, limit=2)
    assert [m["id"] for m in seen] == ["m3", "m2", "m0", "m4", "m1"]
    assert all(m["bank_id"] == bank and m["text"] == f"memory {m['id']} of {bank}" for m in seen)
    assert all(m["archived_event"]["eventId"] == m["id"] for m in seen)
    whole = (await api.get(f"/v1/banks/{bank}/memories")).json()
    assert len(whole["memories"]) == 5 and whole["next_cursor"] is None


async def test_memory_pages_apply_types_tags_and_times(
    stack: LiveStack, app_client: AppClient, banks: tuple[str, str]
) -> None:
    bank, _ = banks
    await keep(stack, bank, "w", 1, fact_type=FactType.WORLD, tags=["red"])
    await keep(stack, bank, "e", 2, fact_type=FactType.EXPERIENCE, tags=["blue"])
    await keep(stack, bank, "p", 3, fact_type=FactType.PREFERENCE, tags=["red", "blue"])
    api = app_client()

    async def ids(**params: Any) -> list[str]:
        return [m["id"] for m in await walk(api, bank, **params)]

    assert await ids(types="world,experience") == ["e", "w"]
    assert await ids(types=["world", "preference"]) == ["p", "w"]
    assert await ids(tags="red") == ["p", "w"]
    assert await ids(tags=["blue"], types="experience") == ["e"]
    assert await ids(since=(START + timedelta(minutes=2)).isoformat()) == ["p", "e"]
    assert await ids(until=(START + timedelta(minutes=2)).isoformat()) == ["w"]
    assert await ids(types="") == ["p", "e", "w"]


async def test_repeated_tags_are_taken_verbatim_and_a_single_value_is_comma_separated(
    stack: LiveStack, app_client: AppClient, banks: tuple[str, str]
) -> None:
    bank, _ = banks
    await keep(stack, bank, "c", 1, tags=["team,infra"])
    await keep(stack, bank, "s", 2, tags=[" padded "])
    await keep(stack, bank, "t", 3, tags=["team"])
    api = app_client()

    async def ids(tags: str | list[str]) -> list[str]:
        return [m["id"] for m in await walk(api, bank, tags=tags)]

    assert await ids(["team,infra", "team,infra"]) == ["c"]  # alone: the tag twice
    assert await ids([" padded ", "team"]) == ["t", "s"]
    assert await ids("team,infra") == ["t"]  # one value: two tags, "team" and "infra"
    assert await ids(" padded ") == []  # one value: stripped to "padded"


async def test_bad_listing_parameters_are_422_naming_the_parameter(
    app_client: AppClient, banks: tuple[str, str]
) -> None:
    bank, _ = banks
    api = app_client()
    route = f"/v1/banks/{bank}/memories"
    for params, field in [
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
        ({"types": "world,planet"}, "types"),
        ({"since": "yesterday"}, "since"),
        ({"until": "2026-03-01T00:00:00"}, "until"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"cursor": encode_cursor(ListingKey("garbage", "x"))}, "cursor"),  # forged time
    ]:
        error = assert_error(await api.get(route, params=params), 422, "invalid_input")
        assert [p["field"] for p in error["problems"]][:1] == [field], (params, error)
    error = assert_error(await api.get("/v1/banks", params={"cursor": "@@"}), 422, "invalid_input")
    assert error["problems"][0]["field"] == "cursor"


async def test_banks_list_what_the_key_grants_with_counts_and_newest_time(
    stack: LiveStack, app_client: AppClient, banks: tuple[str, str], keys: ApiKeys
) -> None:
    bank_a, bank_b = banks
    await keep(stack, bank_a, "w1", 1, fact_type=FactType.WORLD)
    await keep(stack, bank_a, "w2", 7, fact_type=FactType.WORLD)
    await keep(stack, bank_a, "p1", 4, fact_type=FactType.PROCEDURE, steps=["make"])
    await keep(stack, bank_b, "x", 2, fact_type=FactType.EXPERIENCE)

    listed = (await app_client(auth=keys, key=KEY_A).get("/v1/banks")).json()
    assert listed["next_cursor"] is None
    (summary,) = listed["banks"]
    assert summary == {
        "bank_id": bank_a,
        "total": 3,
        "counts": {"world": 2, "procedure": 1},
        "newest_at": "2026-03-01T00:07:00.000Z",
    }
    every = await all_banks(app_client(auth=keys, key=KEY_ALL))
    assert {bank_a, bank_b} <= {b["bank_id"] for b in every}
    assert [b["bank_id"] for b in every] == sorted(b["bank_id"] for b in every)
    assert every == await all_banks(app_client())  # no keys: every bank, as for "*"
    assert_error(await app_client(auth=keys).get("/v1/banks"), 401, "unauthenticated")
    wrong = app_client(auth=keys, key="not-a-key-0123456789")
    assert_error(await wrong.get("/v1/banks"), 401, "unauthenticated")


async def test_a_granted_bank_with_nothing_in_it_is_listed_empty(
    app_client: AppClient, unique_name: str
) -> None:
    granted = [f"{unique_name}-{n}" for n in range(3)]
    key = "key-for-three-empty-banks-0123"
    api = app_client(auth=ApiKeys({key: granted}), key=key)
    first = (await api.get("/v1/banks", params={"limit": 2})).json()
    assert [b["bank_id"] for b in first["banks"]] == granted[:2]
    assert all(
        b["total"] == 0 and b["counts"] == {} and b["newest_at"] is None for b in first["banks"]
    )
    rest = (await api.get("/v1/banks", params={"cursor": first["next_cursor"]})).json()
    assert [b["bank_id"] for b in rest["banks"]] == granted[2:] and rest["next_cursor"] is None


async def all_banks(api: httpx.AsyncClient) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"limit": 1, **({"cursor": cursor} if cursor else {})}
        page = (await api.get("/v1/banks", params=params)).json()
        found += page["banks"]
        cursor = page["next_cursor"]
        if cursor is None:
            return found


# -- paging under concurrent writes ------------------------------------------------------------

#: Few distinct minutes, so many memories share a timestamp and the id must break ties.
minutes = st.integers(min_value=0, max_value=6)
between_pages = st.lists(
    st.tuples(st.sampled_from(["retain", "forget"]), minutes, st.integers(0, 1_000)),
    max_size=3,
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    start=st.lists(minutes, min_size=1, max_size=14),
    limit=st.integers(min_value=1, max_value=4),
    writes=st.lists(between_pages, max_size=8),
)
async def test_a_walk_lists_once_every_memory_present_throughout_while_others_come_and_go(
    stack: LiveStack,
    app_client: AppClient,
    start: list[int],
    limit: int,
    writes: list[list[tuple[str, int, int]]],
) -> None:
    bank = f"walk-{next(_banks)}"
    for n, at in enumerate(start):
        await keep(stack, bank, f"s{n}", at)
    present = {f"s{n}" for n in range(len(start))}
    forgotten: set[str] = set()
    forgetting = Forgetting(archive=stack.archive, index=stack.index)
    api = app_client()
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        page = (await api.get(f"/v1/banks/{bank}/memories", params=params)).json()
        seen += [m["id"] for m in page["memories"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
        for kind, at, pick in writes[pages] if pages < len(writes) else []:
            if kind == "retain":
                await keep(stack, bank, f"n{pages}-{pick}-{at}", at)
            elif live := sorted(present - forgotten):
                victim = live[pick % len(live)]
                await forgetting.forget(bank, victim, actor="test")
                forgotten.add(victim)
        pages += 1
    assert len(seen) == len(set(seen)), "a memory was listed twice"
    assert present - forgotten <= set(seen), "a memory present throughout was skipped"
    assert not {s for s in seen if s.startswith("s")} - present


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    start=st.lists(minutes, min_size=4, max_size=20),
    limit=st.integers(min_value=1, max_value=3),
    churn=st.lists(st.tuples(st.booleans(), minutes, st.integers(0, 1_000)), max_size=12),
)
async def test_a_walk_running_beside_retains_and_forgets_lists_the_stayers_once(
    stack: LiveStack,
    app_client: AppClient,
    start: list[int],
    limit: int,
    churn: list[tuple[bool, int, int]],
) -> None:
    bank = f"churn-{next(_banks)}"
    for n, at in enumerate(start):
        await keep(stack, bank, f"s{n}", at)
    forgetting = Forgetting(archive=stack.archive, index=stack.index)
    forgotten: set[str] = set()

    async def writes() -> None:
        # Concurrent with the walk: every await lets a page request run in between.
        for step, (retain, at, pick) in enumerate(churn):
            if retain:
                await keep(stack, bank, f"c{step}", at)
            else:
                victim = f"s{pick % len(start)}"
                if victim not in forgotten:
                    forgotten.add(victim)
                    await forgetting.forget(bank, victim, actor="test")

    walked, _ = await asyncio.gather(walk(app_client(), bank, limit=limit), writes())
    seen = [m["id"] for m in walked]
    assert len(seen) == len(set(seen)), "a memory was listed twice"
    stayed = {f"s{n}" for n in range(len(start))} - forgotten
    assert stayed <= set(seen), "a memory present throughout was skipped"
