"""A retain of content the bank already holds as that type reinforces it instead of copying it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cogsub.core.events import FactType
from cogsub.core.memory import RecallRequest, RetainContext, RetainRequest
from cogsub.index.ports import DocumentPatch
from tests.services.recall.stack import live_stack

BANK = "jane@example.com"
ACME = "Acme HQ is in Berlin."


def world(content: str, **fields: object) -> RetainRequest:
    return RetainRequest(content=content, fact_type=FactType.WORLD, wait=True, **fields)  # type: ignore[arg-type]


async def test_the_readme_snippet_run_twice_keeps_one_memory(data_dir: Path) -> None:
    async with live_stack(data_dir) as stack:
        first = await stack.service.retain(BANK, world(ACME))
        again = await stack.service.retain(BANK, world("  acme hq IS in\tBerlin. "))
        assert (first.reinforced, again.reinforced) == (False, True)
        assert again.memory_id == first.memory_id and again.recallable
        assert again.object_storage_key == first.object_storage_key
        recalled = await stack.service.recall(
            BANK, RecallRequest(query="Where is Acme HQ?", reinforce=False)
        )
        assert [hit.id for hit in recalled.results] == [first.memory_id]
        kept = await stack.index.get(BANK, first.memory_id)
        assert kept is not None and kept.retrieval_count == 1
        assert await stack.index.count(BANK) == 1


async def test_only_the_same_type_bank_and_words_are_the_same_memory(data_dir: Path) -> None:
    async with live_stack(data_dir) as stack:
        first = await stack.service.retain(BANK, world(ACME))
        others = [
            await stack.service.retain(BANK, world(ACME, memory_id="acme-hq")),  # named: as given
            await stack.service.retain(
                BANK, RetainRequest(content=ACME, fact_type=FactType.PROFILE, wait=True)
            ),
            await stack.service.retain("bob", world(ACME)),
            await stack.service.retain(BANK, world("Acme HQ is in Munich.")),
            await stack.service.retain(BANK, RetainRequest(content=ACME, wait=True)),  # no type
            # The same words stated at another time: another experience, for consolidation.
            await stack.service.retain(
                BANK, world(ACME, timestamp=datetime(2026, 1, 5, tzinfo=UTC))
            ),
        ]
        assert not any(result.reinforced for result in others)
        assert len({first.memory_id, *(r.memory_id for r in others if r.bank_id == BANK)}) == 6
        assert await stack.index.count(BANK) == 6
        timed = await stack.service.retain(
            BANK, world(ACME.upper(), timestamp=datetime(2026, 1, 5, tzinfo=UTC))
        )
        assert timed.reinforced and timed.memory_id == others[-1].memory_id


async def test_a_long_memory_is_compared_whole_not_by_its_summary(data_dir: Path) -> None:
    async with live_stack(data_dir) as stack:
        head = "The runbook for the billing deploy says: " + "check the queue, " * 30
        first = await stack.service.retain(BANK, world(head + "then restart A."))
        second = await stack.service.retain(BANK, world(head + "then restart B."))
        again = await stack.service.retain(BANK, world(head + "then restart B."))
        assert not second.reinforced and second.memory_id != first.memory_id
        assert again.reinforced and again.memory_id == second.memory_id


async def test_new_tags_a_session_or_a_derived_copy_are_not_the_same_memory(
    data_dir: Path,
) -> None:
    async with live_stack(data_dir) as stack:
        first = await stack.service.retain(BANK, world(ACME, tags=["geo"]))
        tagged = await stack.service.retain(BANK, world(ACME, tags=["geo", "hq"]))
        fewer = await stack.service.retain(BANK, world(ACME, tags=["hq"]))
        session = await stack.service.retain(
            BANK, world(ACME, context=RetainContext(session_id="s-2"))
        )
        assert not tagged.reinforced and tagged.memory_id != first.memory_id
        assert fewer.reinforced and fewer.memory_id == tagged.memory_id  # its tags are held
        assert not session.reinforced
        found = await stack.service.recall(BANK, RecallRequest(query="Acme HQ", tags=["hq"]))
        assert tagged.memory_id in {hit.id for hit in found.results}


async def test_a_memory_forgotten_meanwhile_is_stored_anew(data_dir: Path) -> None:
    async with live_stack(data_dir) as stack:
        first = await stack.service.retain(BANK, world(ACME))
        real_update = stack.index.update

        async def forgotten_first(bank_id: str, event_id: str, patch: DocumentPatch) -> Any:
            await stack.index.delete(bank_id, event_id)  # a forget lands between search and patch
            return await real_update(bank_id, event_id, patch)

        stack.index.update = forgotten_first  # type: ignore[method-assign]
        again = await stack.service.retain(BANK, world(ACME))
        assert not again.reinforced and again.memory_id != first.memory_id and again.recallable
