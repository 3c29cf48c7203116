"""forget and forget_bank over a live embedded stack: gone at once, derived content too, audited."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cogsub.core.errors import NotFoundError, UnavailableError
from cogsub.core.memory import RecallRequest
from cogsub.lifecycle import Lifecycle
from tests.services.consolidation.stack import NOW, ConsolidationStack, consolidation_stack
from tests.services.lifecycle.scenario import BANK, OTHER, SECRET, TURN, Populated, populate


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[ConsolidationStack]:
    async with consolidation_stack(tmp_path) as running:
        yield running


@pytest.fixture
async def bank(stack: ConsolidationStack) -> Populated:
    return await populate(stack)


def lifecycle_of(stack: ConsolidationStack) -> Lifecycle:
    return Lifecycle(archive=stack.archive, index=stack.index, clock=lambda: NOW)


async def keys(stack: ConsolidationStack, prefix: str = "") -> list[str]:
    return [k async for k in stack.archive.list(prefix)]


async def recalled_ids(stack: ConsolidationStack, query: str, bank: str = BANK) -> set[str]:
    request = RecallRequest(query=query, all_versions=True, reinforce=False, k=50)
    return {h.id for h in (await stack.service.recall(bank, request)).results}


async def test_forget_erases_the_memory_and_its_facts_and_audits_it(
    stack: ConsolidationStack, bank: Populated
) -> None:
    assert set(bank.facts) <= await recalled_ids(stack, "support group sister Lisbon")
    report = await lifecycle_of(stack).forget(BANK, bank.turn, actor="tester")
    assert report.forgotten[0] == bank.turn
    assert set(bank.facts) <= set(report.forgotten)
    found = await recalled_ids(stack, "support group sister Lisbon")
    assert bank.turn not in found and not set(bank.facts) & found
    for memory_id in (bank.turn, *bank.facts):
        assert await stack.index.get(BANK, memory_id) is None
    remaining = await keys(stack)
    assert not [k for k in remaining if k.endswith(f"/{bank.turn}.json")]
    assert not [k for k in remaining if any(f in k for f in bank.facts)]  # evidence included
    # The merged turn said the same as one fact; it is its own memory and stays.
    assert await stack.index.get(BANK, bank.merged_turn) is not None
    (audit,) = [k for k in remaining if k.startswith(f"audit/{BANK}/")]
    assert audit == report.audit_key
    body = await stack.archive.get(audit)
    record = json.loads(body)
    assert record["action"] == "forget" and record["actor"] == "tester"
    assert record["memoryId"] == bank.turn and record["memoryIds"] == report.forgotten
    assert record["counts"]["archiveObjects"] == report.archive_objects
    assert record["requestedAt"] == "2026-05-20T12:00:00.000Z"
    for text in (TURN, SECRET, "Lisbon", "Caroline"):
        assert text.encode() not in body
    # The other bank's copy of the same words is untouched.
    assert await stack.index.get(OTHER, bank.other_turn) is not None
    assert [k for k in remaining if k.startswith(f"consolidation/{OTHER}/facts/")]


async def test_forgetting_a_source_of_merged_proof_recounts_the_fact(
    stack: ConsolidationStack, bank: Populated
) -> None:
    docs = [await stack.index.get(BANK, f) for f in bank.facts]
    merged = [d.event_id for d in docs if d is not None and "proof:2" in d.tags]
    assert len(merged) == 1
    report = await lifecycle_of(stack).forget(BANK, bank.merged_turn, actor="tester")
    assert report.forgotten == [bank.merged_turn]  # it created no fact of its own
    doc = await stack.index.get(BANK, merged[0])
    assert doc is not None and [t for t in doc.tags if t.startswith("proof:")] == ["proof:1"]
    evidence = await keys(stack, f"consolidation/{BANK}/evidence/")
    assert evidence and not [k for k in evidence if bank.merged_turn in k]


async def test_forgetting_a_correction_forgets_the_repair_and_revives_v1(
    stack: ConsolidationStack, bank: Populated
) -> None:
    report = await lifecycle_of(stack).forget(BANK, bank.drain, actor="tester")
    assert report.forgotten == [bank.drain, bank.procedure_v2]
    request = RecallRequest(query="deploy billing restart", reinforce=False)
    hits = (await stack.service.recall(BANK, request)).results
    (procedure,) = [h for h in hits if h.version is not None]
    assert procedure.id == bank.procedure_v1 and procedure.superseded_by is None
    remaining = await keys(stack)
    assert f"consolidation/{BANK}/supersessions/{bank.procedure_v1}.json" not in remaining
    assert f"consolidation/{BANK}/consumed/{bank.drain}.json" not in remaining
    assert not [k for k in remaining if bank.procedure_v2 in k]


async def test_forgetting_v1_forgets_the_repair_derived_from_it(
    stack: ConsolidationStack, bank: Populated
) -> None:
    report = await lifecycle_of(stack).forget(BANK, bank.procedure_v1, actor="tester")
    assert set(report.forgotten) == {bank.procedure_v1, bank.procedure_v2}
    assert not {bank.procedure_v1, bank.procedure_v2} & await recalled_ids(stack, "deploy billing")


async def test_forgetting_a_winner_revives_the_loser(
    stack: ConsolidationStack, bank: Populated
) -> None:
    loser = next(p for p in bank.superseded if p.startswith("pref-"))
    winner = next(p for p in bank.preferences if p != loser)
    await lifecycle_of(stack).forget(BANK, winner, actor="tester")
    doc = await stack.index.get(BANK, loser)
    assert doc is not None and not [
        t for t in doc.tags if t.startswith(("superseded-by:", "valid-to:"))
    ]
    request = RecallRequest(query="load tests staging cluster", reinforce=False)
    assert loser in {h.id for h in (await stack.service.recall(BANK, request)).results}


async def test_another_banks_memory_is_not_found_and_nothing_changes(
    stack: ConsolidationStack, bank: Populated
) -> None:
    before = await keys(stack)
    counts = (await stack.index.count(BANK), await stack.index.count(OTHER))
    with pytest.raises(NotFoundError):
        await lifecycle_of(stack).forget(BANK, bank.other_turn, actor="tester")
    with pytest.raises(NotFoundError):
        await lifecycle_of(stack).forget(BANK, "never-was", actor="tester")
    assert await keys(stack) == before
    assert (await stack.index.count(BANK), await stack.index.count(OTHER)) == counts


async def test_forgetting_twice_is_not_found_the_second_time(
    stack: ConsolidationStack, bank: Populated
) -> None:
    lifecycle = lifecycle_of(stack)
    await lifecycle.forget(BANK, bank.turn, actor="tester")
    with pytest.raises(NotFoundError):
        await lifecycle.forget(BANK, bank.turn, actor="tester")
    assert len(await keys(stack, f"audit/{BANK}/")) == 1


class FailingDeletes:
    """The archive, except that deleting ``key`` fails (once)."""

    def __init__(self, inner: object, key: str) -> None:
        self._inner = inner
        self._key = key

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    async def delete(self, key: str) -> None:
        if key == self._key:
            self._key = ""
            raise UnavailableError("archive down")
        await self._inner.delete(key)  # type: ignore[attr-defined]


async def test_an_interrupted_forget_is_completed_by_the_next_call(
    stack: ConsolidationStack, bank: Populated
) -> None:
    fact_key = f"consolidation/{BANK}/facts/{bank.facts[0]}.json"
    broken = Lifecycle(
        archive=FailingDeletes(stack.archive, fact_key),  # type: ignore[arg-type]
        index=stack.index,
        clock=lambda: NOW,
    )
    with pytest.raises(UnavailableError):
        await broken.forget(BANK, bank.turn, actor="first")
    assert bank.turn not in await recalled_ids(stack, "support group sister Lisbon")
    assert len(await keys(stack, f"audit/{BANK}/pending/")) == 1
    assert not [k for k in await keys(stack, f"audit/{BANK}/") if "/pending/" not in k]
    report = await lifecycle_of(stack).forget(BANK, bank.turn, actor="second")
    assert report.resumed and set(bank.facts) <= set(report.forgotten)
    assert not [k for k in await keys(stack) if any(f in k for f in bank.facts)]
    assert await keys(stack, f"audit/{BANK}/pending/") == []
    record = json.loads(await stack.archive.get(report.audit_key))
    assert record["actor"] == "first" and record["resumed"] is True


async def test_an_index_without_the_memory_still_finds_its_archive_object(
    stack: ConsolidationStack, bank: Populated
) -> None:
    await stack.index.delete(BANK, bank.turn)  # as after a crash right after the first step
    report = await lifecycle_of(stack).forget(BANK, bank.turn, actor="tester")
    assert set(bank.facts) <= set(report.forgotten)
    assert not [k for k in await keys(stack, "events/") if k.endswith(f"/{bank.turn}.json")]


async def test_forget_bank_erases_the_bank_and_leaves_the_other(
    stack: ConsolidationStack, bank: Populated
) -> None:
    other_keys = [k for k in await keys(stack) if OTHER in k]
    other_count = await stack.index.count(OTHER)
    seen: list[int] = []
    lifecycle = Lifecycle(archive=stack.archive, index=stack.index, clock=lambda: NOW, batch_size=4)
    report = await lifecycle.forget_bank(
        BANK, actor="tester", on_progress=lambda r: seen.append(r.index_documents)
    )
    assert report.complete and report.index_documents > 10 and len(seen) > 3
    assert await stack.index.count(BANK) == 0
    remaining = await keys(stack)
    assert not [k for k in remaining if k.startswith(f"consolidation/{BANK}/")]
    assert [k for k in remaining if k.startswith("events/")] == [
        k for k in other_keys if k.startswith("events/")
    ]
    assert [k for k in remaining if OTHER in k] == other_keys
    assert await stack.index.count(OTHER) == other_count
    assert await stack.index.get(OTHER, bank.other_turn) is not None
    (audit,) = await keys(stack, f"audit/{BANK}/")
    body = await stack.archive.get(audit)
    assert json.loads(body)["counts"]["indexDocuments"] == report.index_documents
    assert SECRET.encode() not in body
    again = await lifecycle.forget_bank(BANK, actor="tester")
    assert again.index_documents == 0 and again.memory_objects == 0 and again.complete


async def test_an_interrupted_forget_bank_is_completed_by_a_rerun(
    stack: ConsolidationStack, bank: Populated
) -> None:
    broken = Lifecycle(
        archive=FailingDeletes(stack.archive, f"consolidation/{BANK}/consumed/{bank.drain}.json"),  # type: ignore[arg-type]
        index=stack.index,
        clock=lambda: NOW,
        batch_size=5,
    )
    with pytest.raises(UnavailableError):
        await broken.forget_bank(BANK, actor="first")
    report = await lifecycle_of(stack).forget_bank(BANK, actor="second")
    assert report.resumed and report.complete
    assert await stack.index.count(BANK) == 0
    assert [k for k in await keys(stack) if BANK in k] == [report.audit_key]
    assert json.loads(await stack.archive.get(report.audit_key))["actor"] == "first"
