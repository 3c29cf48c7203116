"""After a round, replay rebuilds the same live observations, even when a new one is held.

Found in review: a round took the winners of its "more evidence" rule only among the
observations of its own clusters, while replay takes them among every live one. An
observation Z of facts {a, b, c}, then c retired: the next round formed {a, b} and
wrote W beside Z, both live, and replay retired W in favour of Z. Now the round
applies the rule over every live observation it knows, and does not write W at all.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from cogsub.core.derived import (
    DerivedKind,
    DerivedMemory,
    derived_id,
)
from cogsub.core.events import FactType
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.replay import replay
from tests.services.consolidation.stack import (
    NOW,
    ConsolidationStack,
    consolidation_stack,
    live_observations,
    ops_memory,
)

BANK = "ops"
SAID = "The api team ships on Tuesdays."


async def _replayed(stack: ConsolidationStack, path: Path) -> set[str]:
    rebuilt = SqliteMemoryIndex(path)
    try:
        await replay(stack.archive, rebuilt)
        return await live_observations(rebuilt, BANK)
    finally:
        await rebuilt.close()


async def _observed_then_retired(stack: ConsolidationStack) -> str:
    """Z of m-7, m-6 and m-5 (its id), then m-5 retired by an unrelated memory."""
    for day in (7, 6, 5):
        await stack.service.retain(BANK, ops_memory(day, SAID, FactType.WORLD))
    (whole,) = (await stack.rounds.run(BANK, decay=False)).observations
    await stack.service.retain(BANK, ops_memory(4, "The office plants need water.", None))
    retired = await stack.writer.supersede(
        BANK, "m-5", "m-4", valid_to=NOW - timedelta(days=4), rule="retired"
    )
    assert retired
    return whole


async def test_a_round_leaves_the_live_observations_replay_rebuilds(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path / "live") as stack:
        whole = await _observed_then_retired(stack)
        report = await stack.rounds.run(BANK, decay=False)
        running = await live_observations(stack.index, BANK)
        assert await _replayed(stack, tmp_path / "rebuilt.sqlite3") == running
        assert running == {whole}
        # {m-7, m-6} is held by the live Z: not written only to be retired at once.
        assert report.observations == []


async def test_a_round_supersedes_a_live_observation_a_live_one_holds(tmp_path: Path) -> None:
    """A W left live beside Z (by a round before this rule) is retired by the next round."""
    async with consolidation_stack(tmp_path / "live") as stack:
        whole = await _observed_then_retired(stack)
        part_id = derived_id(DerivedKind.OBSERVATION, BANK, "m-6", "m-7")
        part = DerivedMemory(
            memory_id=part_id,
            kind=DerivedKind.OBSERVATION,
            fact_type=FactType.OBSERVATION,
            text=SAID,
            timestamp=NOW - timedelta(days=6),
            importance=0.5,
            sources=("m-6", "m-7"),
        )
        await stack.writer.write(BANK, [part])
        assert await live_observations(stack.index, BANK) == {whole, part_id}
        report = await stack.rounds.run(BANK, decay=False)
        assert report.superseded == [part_id]
        running = await live_observations(stack.index, BANK)
        assert running == {whole}
        assert await _replayed(stack, tmp_path / "rebuilt.sqlite3") == running
