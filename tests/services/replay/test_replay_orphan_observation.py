"""An observation a killed round archived but never indexed does not come back live on replay.

Found by `make faults` (``consolidator-sigkill``): a round killed between archiving an
observation and indexing it leaves the object; once its cluster has grown the next
round derives another id and never completes it, and no supersession record names
it. Replay applies the round's rule (a live observation another live one contains is
superseded), so the rebuilt index's live observations are the running index's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cogsub.core.derived import (
    CONSOLIDATION_PREFIX,
    SUPERSEDED_BY_TAG,
    SUPERSEDES_TAG,
)
from cogsub.core.errors import UnavailableError
from cogsub.core.events import FactType
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.replay import replay
from tests.services.consolidation.stack import (
    ConsolidationStack,
    consolidation_stack,
    live_observations,
    ops_memory,
)
from tests.services.consolidation.test_crash import CrashingIndex, Fuse

BANK = "ops"
SAID = "The api team ships on Tuesdays."


async def leave_an_orphan(stack: ConsolidationStack) -> tuple[str, str]:
    """A killed round's observation archived, never indexed, and its successor's id."""
    for day in (7, 6):
        await stack.service.retain(BANK, ops_memory(day, SAID, FactType.WORLD))
    # Killed after the observation's archive write, at its index write.
    killed = stack.round_over(CrashingIndex(stack.index, Fuse(0)), stack.archive)
    with pytest.raises(UnavailableError):
        await killed.run(BANK, decay=False)
    prefix = f"{CONSOLIDATION_PREFIX}{BANK}/observations/"
    (key,) = [k async for k in stack.archive.list(prefix)]
    orphan = key.rsplit("/", 1)[-1].removesuffix(".json")
    assert await stack.index.get(BANK, orphan) is None
    # The cluster grows before the next round: another id, the orphan left as it is.
    await stack.service.retain(BANK, ops_memory(5, SAID, FactType.WORLD))
    (successor,) = (await stack.rounds.run(BANK, decay=False)).observations
    assert successor != orphan
    assert await stack.index.get(BANK, orphan) is None
    return orphan, successor


async def test_replay_supersedes_an_orphan_observation_its_successor_contains(
    tmp_path: Path,
) -> None:
    async with consolidation_stack(tmp_path / "live") as stack:
        orphan, successor = await leave_an_orphan(stack)
        running = await live_observations(stack.index, BANK)
        assert running == {successor}

        rebuilt = SqliteMemoryIndex(tmp_path / "rebuilt.sqlite3")
        try:
            await replay(stack.archive, rebuilt)
            assert await live_observations(rebuilt, BANK) == running
            gone = await rebuilt.get(BANK, orphan)
            assert gone is not None
            assert f"{SUPERSEDED_BY_TAG}{successor}" in gone.tags
            kept = await rebuilt.get(BANK, successor)
            assert kept is not None and f"{SUPERSEDES_TAG}{orphan}" in kept.tags
            # Replay again over the rebuilt index (upserts put the archived tags back):
            # the rule is applied again, to the same effect.
            await replay(stack.archive, rebuilt)
            assert await live_observations(rebuilt, BANK) == running
        finally:
            await rebuilt.close()
