"""Extraction on experience.enriched: facts linked to their source, near-duplicates merged."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from cogsub.consolidation import FactStage
from cogsub.core.errors import (
    CogsubError,
    ConflictError,
    FieldProblem,
    InvalidInputError,
    UnavailableError,
)
from cogsub.core.events import FactType
from cogsub.core.memory import RecallRequest, RetainRequest
from cogsub.core.topics import EXPERIENCE_ENRICHED
from cogsub.extraction.offline import OfflineExtractor
from cogsub.index.ports import DocumentPatch, MemoryIndex
from tests.services.consolidation.stack import ConsolidationStack, consolidation_stack

BANK = "caroline"
MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


async def _enriched(stack: ConsolidationStack, count: int) -> list[bytes]:
    consumer = stack.bus.consumer([EXPERIENCE_ENRICHED], group="test-reader")
    values: list[bytes] = []
    try:
        while len(values) < count:
            values += [r.value for r in await consumer.poll(max_records=100, timeout_s=2.0)]
    finally:
        await consumer.close()
    return values


async def _say(
    stack: ConsolidationStack, text: str, *, memory_id: str, bank: str = BANK, **fields: object
) -> str:
    request = RetainRequest(
        content=text,
        timestamp=MAY_8,
        memory_id=memory_id,
        wait=True,
        **fields,  # type: ignore[arg-type]
    )
    return (await stack.service.retain(bank, request)).object_storage_key


async def test_plain_content_becomes_facts_linked_to_the_source(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        key = await _say(
            stack,
            "Caroline: I went to a support group yesterday. My sister lives in Lisbon.",
            memory_id="turn-1",
        )
        (payload,) = await _enriched(stack, 1)
        outcome = await stack.facts.handle(payload)
        assert len(outcome.created) == 2 and outcome.bank_id == BANK
        first = await stack.service.get_memory(BANK, outcome.created[0])
        assert first.fact_type is FactType.WORLD
        assert first.text.startswith("Caroline went to a support group yesterday (7 May 2023)")
        details = first.archived_event["input"]["structured"]
        assert details["sourceEventId"] == "turn-1"
        assert details["sourceObjectKey"] == key
        assert details["occurredOn"] == "2023-05-07"
        assert first.timestamp == "2023-05-08T13:56:00.000Z"
        found = await stack.service.recall(
            BANK, RecallRequest(query="where does the sister live", types=[FactType.WORLD])
        )
        assert found.results[0].text == "Caroline's sister lives in Lisbon."
        assert found.results[0].source_event_id == "turn-1"  # the fact points at its event


async def test_a_near_duplicate_is_merged_and_counted_once(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        await _say(stack, "Caroline: My sister lives in Lisbon.", memory_id="turn-1")
        await _say(stack, "Caroline: my sister lives in Lisbon!", memory_id="turn-2")
        first, second = await _enriched(stack, 2)
        created = await stack.facts.handle(first)
        merged = await stack.facts.handle(second)
        (fact_id,) = created.created
        assert merged.created == () and merged.merged == (fact_id,)
        for payload in (first, second, second):  # redeliveries change nothing
            again = await stack.facts.handle(payload)
            assert again.created == () and again.merged == ()
        doc = await stack.index.get(BANK, fact_id)
        assert doc is not None and [t for t in doc.tags if t.startswith("proof:")] == ["proof:2"]
        facts = await stack.index.count(BANK)
        assert facts == 3  # two raw turns and one fact


def _stage(stack: ConsolidationStack, index: MemoryIndex, *, semantic: bool = False) -> FactStage:
    """The stack's fact stage over ``index`` (a wrapper that counts or fails)."""
    return FactStage(
        archive=stack.archive,
        index=index,
        embedder=stack.embedder,
        extractor=OfflineExtractor(),
        writer=stack.writer,
        semantic=semantic,
    )


class _CountsPatches:
    """The index, noting which documents extraction patches."""

    def __init__(self, index: MemoryIndex) -> None:
        self._index = index
        self.patched: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)

    async def update_many(self, bank_id: str, patches: Mapping[str, DocumentPatch]) -> int:
        self.patched += sorted(patches)
        return await self._index.update_many(bank_id, patches)


async def test_a_new_fact_is_born_with_its_proof_and_only_repeats_are_recounted(
    tmp_path: Path,
) -> None:
    async with consolidation_stack(tmp_path) as stack:
        counting = _CountsPatches(stack.index)
        facts = _stage(stack, cast(MemoryIndex, counting))
        await _say(stack, "Caroline: Melanie paints sunsets.", memory_id="turn-1")
        await _say(stack, "Caroline: My sister lives in Lisbon.", memory_id="turn-2")
        await _say(stack, "Caroline: my sister lives in Lisbon!", memory_id="turn-3")
        paints, lisbon, lisbon_again = await _enriched(stack, 3)

        async def proofs(fact_id: str) -> list[str]:
            doc = await stack.index.get(BANK, fact_id)
            assert doc is not None
            return [t for t in doc.tags if t.startswith("proof:")]

        (new,) = await facts.handle_many([paints])
        assert not isinstance(new, Exception) and len(new.created) == 1
        assert counting.patched == []  # a new fact with its one proof: not rewritten
        assert await proofs(new.created[0]) == ["proof:1"]
        first, second = await facts.handle_many([lisbon, lisbon_again])
        assert not isinstance(first, Exception) and not isinstance(second, Exception)
        (fact_id,) = first.created
        assert second.created == () and second.merged == (fact_id,)  # the first source wins
        assert counting.patched == [fact_id]  # new, and said twice in the batch: recounted
        assert await proofs(fact_id) == ["proof:2"]
        (again,) = await facts.handle_many([lisbon_again])  # a redelivery adds no proof
        assert not isinstance(again, Exception) and again.merged == ()
        assert await proofs(fact_id) == ["proof:2"]


class _PresentFails:
    """The index, failing the lookup of which facts exist for one bank."""

    def __init__(self, index: MemoryIndex, bank_id: str, error: CogsubError) -> None:
        self._index, self._bank_id, self._error = index, bank_id, error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)

    async def present(self, bank_id: str, event_ids: Sequence[str]) -> set[str]:
        if bank_id == self._bank_id:
            raise self._error
        return await self._index.present(bank_id, event_ids)


async def test_a_bank_whose_lookup_is_refused_as_bad_input_fails_only_its_announcements(
    tmp_path: Path,
) -> None:
    async with consolidation_stack(tmp_path) as stack:
        await _say(stack, "Caroline: My sister lives in Lisbon.", memory_id="t-1")
        await _say(stack, "Melanie: I paint sunsets.", memory_id="t-2", bank="melanie")
        await _say(stack, "Caroline: hi!", memory_id="t-3")  # states no facts: not looked up
        payloads = await _enriched(stack, 3)

        def stage(error: CogsubError) -> FactStage:
            return _stage(stack, cast(MemoryIndex, _PresentFails(stack.index, BANK, error)))

        with pytest.raises(UnavailableError):  # a backend down: the whole batch again
            await stage(UnavailableError("index down")).handle_many(payloads)
        with pytest.raises(ConflictError):  # a broken setting is no announcement's fault
            await stage(ConflictError("mapping broken")).handle_many(payloads)
        assert await stack.index.count("melanie") == 1  # nothing written
        refused = InvalidInputError([FieldProblem("ids", "refused")])
        outcomes = await stage(refused).handle_many(payloads)
        by_source = {o.source_event_id: o for o in outcomes if not isinstance(o, CogsubError)}
        assert [o for o in outcomes if isinstance(o, CogsubError)] == [refused]
        assert len(by_source["t-2"].created) == 1 and by_source["t-3"].skipped is not None
        assert await stack.index.count("melanie") == 2 and await stack.index.count(BANK) == 2


async def test_a_batch_planned_while_the_one_before_is_written_adds_its_proof(
    tmp_path: Path,
) -> None:
    # The worker plans batch N+1 while batch N is written: both plan the same new fact.
    async with consolidation_stack(tmp_path) as stack:
        await _say(stack, "Caroline: My sister lives in Lisbon.", memory_id="turn-1")
        await _say(stack, "Caroline: my sister lives in Lisbon!", memory_id="turn-2")
        first, second = await _enriched(stack, 2)
        planned_first = await stack.facts.plan_many([first])
        planned_second = await stack.facts.plan_many([second])
        (created,) = await stack.facts.write_planned(planned_first)
        (merged,) = await stack.facts.write_planned(planned_second)
        assert not isinstance(created, Exception) and not isinstance(merged, Exception)
        (fact_id,) = created.created
        assert merged.created == () and merged.merged == (fact_id,)
        doc = await stack.index.get(BANK, fact_id)
        assert doc is not None and [t for t in doc.tags if t.startswith("proof:")] == ["proof:2"]
        assert await stack.index.count(BANK) == 3  # two raw turns and one fact


async def test_a_rewording_planned_while_the_fact_is_written_is_merged_into_it(
    tmp_path: Path,
) -> None:
    async with consolidation_stack(tmp_path) as stack:
        # Near-duplicates are searched for, not only the same id.
        facts = _stage(stack, stack.index, semantic=True)
        await _say(stack, "Caroline: My sister lives in Lisbon with two cats.", memory_id="t-1")
        await _say(stack, "Caroline: My sister lives in Lisbon with two cats now.", memory_id="t-2")
        first, second = await _enriched(stack, 2)
        planned_first = await facts.plan_many([first])
        planned_second = await facts.plan_many([second])  # cannot see the first's fact yet
        (created,) = await facts.write_planned(planned_first)
        (merged,) = await facts.write_planned(planned_second)
        assert not isinstance(created, Exception) and not isinstance(merged, Exception)
        (fact_id,) = created.created
        assert merged.created == () and merged.merged == (fact_id,)
        doc = await stack.index.get(BANK, fact_id)
        assert doc is not None and [t for t in doc.tags if t.startswith("proof:")] == ["proof:2"]
        assert await stack.index.count(BANK) == 3


async def test_typed_memories_are_not_extracted(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        await _say(
            stack, "Use the personal calendar.", memory_id="p-1", fact_type=FactType.PREFERENCE
        )
        (payload,) = await _enriched(stack, 1)
        outcome = await stack.facts.handle(payload)
        assert outcome.skipped is not None and outcome.created == ()
        assert await stack.index.count(BANK) == 1
