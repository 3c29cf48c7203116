"""Whatever the API acknowledges, ingestion accepts: never a 2xx that is then dead-lettered.

Hypothesis draws retain bodies (plain and typed blocks) across the whole space the
API's models admit — any year, any offset, control characters, long texts, many tags,
long step lists — and posts each with ``wait``. Every body is either refused with a
422 naming a field, or answered 201 and recallable; the dead-letter topic stays empty.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cogsub.core.events import MAX_TAG_LENGTH, MAX_TEXT_LENGTH, FactType
from cogsub.core.memory import MAX_STEPS
from cogsub.core.topics import EXPERIENCE_RAW_DLQ
from tests.services.api.conftest import AppClient
from tests.services.recall.stack import LiveStack

BANK = "acknowledged"
# Text with everything a producer may send: controls, NUL, astral planes, RTL, quotes.
any_text = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=80)
long_text = st.integers(min_value=1, max_value=MAX_TEXT_LENGTH).map(
    lambda n: "\x01é" * (n // 2) + "x"
)
texts = any_text | long_text | st.sampled_from(["Acme HQ is in Berlin.", "  ", "\x00"])
offsets = st.integers(min_value=-23 * 60, max_value=23 * 60).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
moments = st.builds(
    lambda moment, zone: moment.replace(tzinfo=zone).isoformat(),
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59)),
    offsets,
)
safe_ids = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.:@+-]{0,127}", fullmatch=True).filter(
    lambda i: ".." not in i
)
tags = st.lists(
    st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=MAX_TAG_LENGTH),
    max_size=62,
)
contexts = st.fixed_dictionaries(
    {},
    optional={
        "session_id": any_text,
        "user_id": any_text,
        "agent_id": st.text(min_size=0, max_size=4_096),
    },
)
common: dict[str, st.SearchStrategy[Any]] = {
    "tags": tags,
    "timestamp": moments,
    "context": contexts,
    "memory_id": safe_ids,
}
retain_bodies = st.fixed_dictionaries(
    {"content": texts},
    optional={**common, "fact_type": st.sampled_from([t.value for t in FactType])},
)
steps = st.lists(texts.map(lambda t: t[:2_000]), min_size=1, max_size=MAX_STEPS)
procedure_bodies = st.fixed_dictionaries(
    {"steps": steps}, optional={**common, "rationale": any_text}
)
block_bodies = st.fixed_dictionaries({"text": texts}, optional=common)
routes = st.one_of(
    st.tuples(st.just("post"), st.just("memories"), retain_bodies),
    st.tuples(st.just("post"), st.just("procedures"), procedure_bodies),
    st.tuples(
        st.just("post"), st.sampled_from(["reasonings", "preferences", "corrections"]), block_bodies
    ),
    st.tuples(st.just("put"), st.just("profile"), block_bodies),
)


async def dead_letters(stack: LiveStack) -> int:
    return (await stack.bus.topic_stats(EXPERIENCE_RAW_DLQ)).end_offset


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(route=routes)
async def test_every_acknowledged_retain_is_archived_and_indexed(
    app_client: AppClient, stack: LiveStack, route: tuple[str, str, dict[str, Any]]
) -> None:
    method, resource, body = route
    client = app_client(max_body_bytes=4 * 1024 * 1024)
    if "memory_id" in body:  # an id taken by an earlier example's other content is a conflict
        body = {**body, "memory_id": f"{body['memory_id'][:100]}-{id(body)}"}
    answer = await client.request(
        method, f"/v1/banks/{BANK}/{resource}", json={**body, "wait": True}
    )
    if answer.status_code == 422:
        problems = answer.json()["error"]["problems"]
        assert problems and all(p["field"] for p in problems), answer.text
        return
    assert answer.status_code == 201, answer.text
    result = answer.json()
    assert result["recallable"] is True
    got = await client.get(f"/v1/banks/{BANK}/memories/{result['memory_id']}")
    assert got.status_code == 200, got.text
    assert await dead_letters(stack) == 0


async def test_a_year_before_1000_is_kept(app_client: AppClient, stack: LiveStack) -> None:
    client = app_client()
    body = {"content": "an old memory", "timestamp": "0999-01-01T00:00:00Z", "wait": True}
    answer = await client.post(f"/v1/banks/{BANK}/memories", json=body)
    assert answer.status_code == 201, answer.text
    assert answer.json()["object_storage_key"].startswith("events/0999/01/01/banks/")
    assert await dead_letters(stack) == 0


async def test_a_timestamp_with_no_utc_instant_is_refused_naming_it(
    app_client: AppClient,
) -> None:
    client = app_client()
    body = {"text": "too early", "timestamp": "0001-01-01T00:00:00+05:00"}
    answer = await client.post(f"/v1/banks/{BANK}/reasonings", json=body)
    assert answer.status_code == 422, answer.text
    fields = [p["field"] for p in answer.json()["error"]["problems"]]
    assert any("timestamp" in field for field in fields), fields


async def test_a_body_too_large_for_an_event_is_refused_naming_the_content(
    app_client: AppClient, stack: LiveStack
) -> None:
    client = app_client(max_body_bytes=4 * 1024 * 1024)
    # Each control character takes six bytes in the event's JSON: 100 steps of them overflow.
    body = {"steps": ["\x01" * 1_999] * MAX_STEPS, "wait": True}
    answer = await client.post(f"/v1/banks/{BANK}/procedures", json=body)
    assert answer.status_code == 422, answer.text
    assert [p["field"] for p in answer.json()["error"]["problems"]] == ["content"]
    assert await dead_letters(stack) == 0
