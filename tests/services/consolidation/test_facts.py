"""Extraction on experience.enriched: facts linked to their source, near-duplicates merged."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from cogsub.core.events import FactType
from cogsub.core.memory import RecallRequest, RetainRequest
from cogsub.core.topics import EXPERIENCE_ENRICHED
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


async def _say(stack: ConsolidationStack, text: str, *, memory_id: str, **fields: object) -> str:
    request = RetainRequest(
        content=text,
        timestamp=MAY_8,
        memory_id=memory_id,
        wait=True,
        **fields,  # type: ignore[arg-type]
    )
    return (await stack.service.retain(BANK, request)).object_storage_key


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


async def test_typed_memories_are_not_extracted(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        await _say(
            stack, "Use the personal calendar.", memory_id="p-1", fact_type=FactType.PREFERENCE
        )
        (payload,) = await _enriched(stack, 1)
        outcome = await stack.facts.handle(payload)
        assert outcome.skipped is not None and outcome.created == ()
        assert await stack.index.count(BANK) == 1
