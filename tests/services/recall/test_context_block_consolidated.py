"""A context block over a consolidated bank: distilled corrections are not repeated as rules."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from cogsub.core.context import ContextRequest, SectionName
from cogsub.core.events import FactType
from cogsub.core.memory import RetainRequest
from cogsub.recall.context_block import context_block
from tests.services.consolidation.stack import NOW, consolidation_stack

BANK = "jane"
SAID = (
    "No — for day-planning use my personal Gmail, never the work mail.",
    "No — plan the day in the morning, never the evening before.",
)


async def test_two_distilled_corrections_leave_only_their_preferences_in_the_rules(
    tmp_path: Path,
) -> None:
    async with consolidation_stack(tmp_path) as stack:
        corrections = [
            await stack.service.retain(
                BANK,
                RetainRequest(
                    content=text,
                    fact_type=FactType.CORRECTION,
                    timestamp=NOW - timedelta(days=days),
                    wait=True,
                ),
            )
            for days, text in enumerate(SAID, start=1)
        ]
        request = ContextRequest(query="how do I plan the day with mail?", max_tokens=1_000)
        before = await context_block(stack.service, BANK, request)
        assert set(before.memory_ids()) == {c.memory_id for c in corrections}

        report = await stack.rounds.run(BANK)
        assert len(report.preferences) == 2
        after = await context_block(stack.service, BANK, request)
        (rules,) = [s for s in after.sections if s.name is SectionName.RULES]
        assert sorted(i.memory_id for i in rules.items) == sorted(report.preferences)
        assert {i.type for i in rules.items} == {FactType.PREFERENCE}
        assert "No —" not in after.text
