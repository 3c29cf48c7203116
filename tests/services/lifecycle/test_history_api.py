"""History traced end to end through the API, on a bank consolidation really worked on.

The scenario bank holds raw turns and the facts extracted from them (one proved
twice), a procedure a correction repaired to v2, an observation of a repeated
pattern and an explicit preference distilled from a correction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from cogsub.api import ApiKeys, ApiLimits, create_app
from cogsub.core.history import MemoryHistory
from tests.services.consolidation.stack import ConsolidationStack, consolidation_stack
from tests.services.lifecycle.scenario import BANK, OTHER, Populated, populate

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
async def api(stack: ConsolidationStack) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(
        service=stack.service,
        auth=ApiKeys({KEY: [BANK], OTHER_KEY: [OTHER]}),
        limits=ApiLimits(max_body_bytes=1_048_576),
        consolidate=stack.rounds.run,
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://api",
        headers={"Authorization": f"Bearer {KEY}"},
    ) as client:
        yield client


async def history(api: httpx.AsyncClient, memory_id: str, bank_id: str = BANK) -> MemoryHistory:
    response = await api.get(f"/v1/banks/{bank_id}/memories/{memory_id}/history")
    assert response.status_code == 200, response.text
    return MemoryHistory.model_validate(response.json())


async def test_a_repaired_procedure_traces_v1_to_v2_and_the_correction_that_decided(
    bank: Populated, api: httpx.AsyncClient
) -> None:
    old = await history(api, bank.procedure_v1)
    assert [v.memory_id for v in old.versions] == [bank.procedure_v1, bank.procedure_v2]
    assert [v.version for v in old.versions] == [1, 2]
    assert [v.current for v in old.versions] == [False, True]
    assert old.superseded_by is not None
    assert old.superseded_by.superseded_by == bank.procedure_v2
    assert old.superseded_by.rule.startswith(f"repaired by correction {bank.drain}")
    assert old.signals is not None and old.signals.superseded
    assert old.memory.text == "Deploy billing"  # v1 stays readable, verbatim

    new = await history(api, bank.procedure_v2)
    assert new.kind == "procedure"
    assert [s.memory_id for s in new.supersedes] == [bank.procedure_v1]
    assert [c.memory_id for c in new.corrections] == [bank.drain]
    assert new.corrections[0].text == "No — drain the pod before restart."
    assert new.corrections[0].event_id == bank.drain
    assert [s.memory_id for s in new.sources] == [bank.procedure_v1]
    assert new.superseded_by is None and new.signals is not None and not new.signals.superseded
    assert "drain the pod" in (new.versions[-1].text or "").lower()


async def test_a_correction_becomes_a_preference_through_consolidate_and_its_history_says_so(
    stack: ConsolidationStack, bank: Populated, api: httpx.AsyncClient
) -> None:
    text = "No — never page the on-call engineer for staging alerts."
    posted = await api.post(f"/v1/banks/{BANK}/corrections", json={"text": text, "wait": True})
    assert posted.status_code == 201, posted.text
    correction = posted.json()["memory_id"]
    round_ = await api.post(f"/v1/banks/{BANK}/consolidate")
    assert round_.status_code == 200, round_.text
    (preference,) = round_.json()["preferences"]

    traced = await history(api, preference)
    assert traced.kind == "preference"
    assert traced.memory.fact_type == "preference"
    assert [(c.memory_id, c.relation, c.text) for c in traced.corrections] == [
        (correction, "correction", text)
    ]
    assert traced.sources == []  # the correction is its only source
    assert traced.versions[0].memory_id == preference and traced.versions[0].current


async def test_an_observation_names_the_memories_and_raw_events_that_proved_it(
    stack: ConsolidationStack, bank: Populated, api: httpx.AsyncClient
) -> None:
    (observation,) = [o for o in bank.observations if "Fridays" in await _text(stack, o)]
    traced = await history(api, observation)
    assert traced.kind == "observation"
    assert len(traced.sources) == 3
    for source in traced.sources:  # retained as world facts: each is its own raw event
        assert source.text == "Jane ships the billing release on Fridays."
        assert source.event_id == source.memory_id
        raw = await api.get(f"/v1/banks/{BANK}/memories/{source.event_id}")
        assert (
            raw.status_code == 200 and raw.json()["archived_event"]["eventId"] == source.memory_id
        )
    assert traced.signals is not None and traced.signals.proof_count == 3


async def test_a_fact_said_twice_has_two_pieces_of_evidence(
    stack: ConsolidationStack, bank: Populated, api: httpx.AsyncClient
) -> None:
    lisbon = [f for f in bank.facts if "Lisbon" in await _text(stack, f)]
    (fact,) = lisbon
    traced = await history(api, fact)
    assert traced.kind == "fact"
    assert {e.memory_id for e in traced.evidence} == {bank.turn, bank.merged_turn}
    assert all(e.event_id == e.memory_id for e in traced.evidence)
    assert [s.memory_id for s in traced.sources] == [bank.turn]
    assert traced.signals is not None and traced.signals.proof_count == 2


async def test_a_retained_memory_has_a_plain_history_with_its_signals_now(
    bank: Populated, api: httpx.AsyncClient
) -> None:
    traced = await history(api, bank.turn)
    assert traced.kind is None and traced.sources == [] and traced.corrections == []
    assert [v.memory_id for v in traced.versions] == [bank.turn]
    assert traced.signals is not None
    assert 0.0 < traced.signals.decay_factor <= 1.0
    assert traced.signals.retrieval_count >= 0


async def test_history_of_an_unknown_or_another_bank_s_memory_is_404(
    bank: Populated, api: httpx.AsyncClient
) -> None:
    missing = await api.get(f"/v1/banks/{BANK}/memories/nope/history")
    assert missing.status_code == 404
    elsewhere = await api.get(f"/v1/banks/{BANK}/memories/{bank.other_turn}/history")
    assert elsewhere.status_code == 404
    foreign = await api.get(f"/v1/banks/{OTHER}/memories/{bank.other_turn}/history")
    assert foreign.status_code == 403


async def _text(stack: ConsolidationStack, memory_id: str) -> str:
    record: Any = await stack.service.get_memory(BANK, memory_id)
    return str(record.text)
