"""Listing, history and update from both SDK clients: in-process over the real app, and embedded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from cogsub.api import ApiKeys, ApiLimits, create_app
from cogsub.core.errors import ConflictError, InvalidInputError
from cogsub.sdk import AsyncMemoryClient, MemoryClient, PermissionDeniedError
from tests.services.recall.stack import LiveStack

LIMITS = ApiLimits(max_body_bytes=65_536, readiness_timeout_s=1.0)
T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
KEY = "key-for-the-sdk-bank-0123456789"


async def test_the_async_client_lists_traces_and_updates(
    stack: LiveStack, unique_name: str
) -> None:
    bank = unique_name
    auth = ApiKeys({KEY: [bank]})
    app = create_app(service=stack.service, auth=auth, limits=LIMITS)
    transport = httpx.ASGITransport(app=app)
    async with AsyncMemoryClient("http://api", api_key=KEY, transport=transport) as cm:
        for n in range(5):
            await cm.retain(
                bank, f"note {n}", fact_type="world", timestamp=T0 + timedelta(hours=n), wait=True
            )
        steps = ["make build", "make deploy"]
        v1 = await cm.retain_procedure(bank, steps, wait=True)  # now: after every note

        pages = [page async for page in cm.memory_pages(bank, limit=2)]
        assert [len(p.memories) for p in pages] == [2, 2, 2]
        listed = [m async for m in cm.list_memories(bank, limit=2)]
        assert listed[0].id == v1.memory_id
        assert [m.text for m in listed[1:]] == [f"note {n}" for n in reversed(range(5))]
        worlds = [
            m.id async for m in cm.list_memories(bank, types="world", since=T0 + timedelta(hours=3))
        ]
        assert len(worlds) == 2

        (summary,) = (await cm.list_banks()).banks
        assert (summary.bank_id, summary.total, summary.counts) == (
            bank,
            6,
            {"world": 5, "procedure": 1},
        )

        v2 = await cm.update(bank, v1.memory_id, steps=[*steps, "curl /health"], wait=True)
        assert v2.version == 2
        traced = await cm.history(bank, v1.memory_id)
        assert [v.memory_id for v in traced.versions] == [v1.memory_id, v2.memory_id]
        assert traced.superseded_by is not None and traced.superseded_by.rule == "update"
        with pytest.raises(ConflictError):
            await cm.update(bank, v1.memory_id, steps=["other"])
        with pytest.raises(InvalidInputError) as raised:
            [m async for m in cm.list_memories(bank, limit=500)]
        assert raised.value.problems[0].field == "limit"
        with pytest.raises(PermissionDeniedError):
            await cm.history("someone-else", v1.memory_id)


def test_the_embedded_client_walks_a_bank_and_updates_a_memory(
    tmp_path: Path, unique_name: str
) -> None:
    with MemoryClient.embedded(tmp_path / "data", embedder="hash") as cm:
        kept = cm.retain(unique_name, "Acme HQ is in Berlin.", fact_type="world", wait=True)
        newer = cm.update(unique_name, kept.memory_id, "Acme HQ is in Munich.", wait=True)
        assert [m.text for m in cm.list_memories(unique_name)] == ["Acme HQ is in Munich."]
        every = list(cm.list_memories(unique_name, include_superseded=True))
        assert {m.id for m in every} == {kept.memory_id, newer.memory_id}
        assert cm.history(unique_name, kept.memory_id).superseded_by is not None
        assert [b.bank_id for b in cm.list_banks().banks] == [unique_name]
        hits = cm.recall(unique_name, "where is Acme HQ?").results
        assert [h.id for h in hits] == [newer.memory_id]


def test_the_client_asks_for_tags_holding_commas_or_edge_spaces(
    tmp_path: Path, unique_name: str
) -> None:
    with MemoryClient.embedded(tmp_path / "data", embedder="hash") as cm:
        odd = ["team,infra", " padded "]
        kept = {
            t: cm.retain(unique_name, f"tagged {t}", tags=[t], wait=True).memory_id for t in odd
        }
        plain = cm.retain(unique_name, "tagged team", tags=["team"], wait=True).memory_id
        for tag in odd:
            assert [m.id for m in cm.list_memories(unique_name, tags=[tag])] == [kept[tag]]
        both = {m.id for m in cm.list_memories(unique_name, tags=["team,infra", "team"])}
        assert both == {kept["team,infra"], plain}
