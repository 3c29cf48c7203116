"""A round that dies after writing a grown observation still leaves its predecessor superseded.

Found by `make faults` (``consolidator-sigkill``): a consolidator killed after it had
indexed an observation with one more source, before it tagged the observation it
replaces, left both live; every later round found the new one written and never
came back to the old one. The next round now supersedes the predecessors of every
observation of the bank's clusters, new or standing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cogsub.consolidation import ConsolidationRound
from cogsub.core.derived import SUPERSEDED_BY_TAG, is_superseded
from cogsub.core.errors import UnavailableError
from cogsub.core.events import FactType
from cogsub.index.ports import SearchFilters
from tests.services.consolidation.stack import (
    ConsolidationStack,
    consolidation_stack,
    ops_memory,
)
from tests.services.consolidation.test_crash import CrashingArchive, CrashingIndex, Fuse

BANK = "ops"
SAID = "The api team ships on Tuesdays."


async def _retain(stack: ConsolidationStack, day: int) -> None:
    await stack.service.retain(BANK, ops_memory(day, SAID, FactType.WORLD, tags=[f"d{day}"]))


async def _observations(stack: ConsolidationStack) -> dict[str, list[str]]:
    """Each observation of the bank, with its ``superseded-by:`` tags."""
    filters = SearchFilters(bank_id=BANK, fact_types=frozenset({FactType.OBSERVATION}))
    docs = await stack.index.scan(filters, size=100)
    return {d.event_id: [t for t in d.tags if t.startswith(SUPERSEDED_BY_TAG)] for d in docs}


async def _grown(stack: ConsolidationStack) -> str:
    """An observation of two memories (its id), then a third memory of the same cluster."""
    for day in (7, 6):
        await _retain(stack, day)
    (first,) = (await stack.rounds.run(BANK, decay=False)).observations
    await _retain(stack, 5)
    return first


def _crashing(stack: ConsolidationStack, fuse: Fuse) -> ConsolidationRound:
    """A round over the stack whose index and archive writes all go through ``fuse``."""
    return stack.round_over(
        CrashingIndex(stack.index, fuse),  # type: ignore[arg-type]
        CrashingArchive(stack.archive, fuse),  # type: ignore[arg-type]
    )


@pytest.mark.slow
async def test_a_crash_after_any_write_of_a_grown_observation_is_completed(
    tmp_path: Path,
) -> None:
    async with consolidation_stack(tmp_path / "count") as counting:
        first = await _grown(counting)
        probe = Fuse(10_000)
        (second,) = (await _crashing(counting, probe).run(BANK, decay=False)).observations
    # the new one archived and indexed, its sources reinforced, the claim, both tags
    assert probe.count >= 6
    for crash_at in range(probe.count):
        async with consolidation_stack(tmp_path / f"crash-{crash_at}") as stack:
            assert await _grown(stack) == first
            with pytest.raises(UnavailableError):
                await _crashing(stack, Fuse(crash_at)).run(BANK, decay=False)
            await stack.rounds.run(BANK, decay=False)
            found = await _observations(stack)
            assert found == {first: [f"{SUPERSEDED_BY_TAG}{second}"], second: []}, crash_at
            live = [i for i, tags in found.items() if not tags]
            assert live == [second]
            doc = await stack.index.get(BANK, first)
            assert doc is not None and is_superseded(doc)
