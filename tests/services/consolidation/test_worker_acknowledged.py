"""An on-demand round covers everything acknowledged before it was asked for."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cogsub.bus.ports import EventBus
from cogsub.consolidation.worker import Backlog, not_yet_committed
from cogsub.core.errors import UnavailableError
from cogsub.core.topics import EXPERIENCE_RAW, STAGE1_TOPICS
from cogsub.sdk import MemoryClient
from tests.services.consolidation.stack import consolidation_stack

RELEASE = "Jane ships the billing release on Fridays."


def test_retains_without_wait_are_all_in_the_round_asked_for_next(tmp_path: Path) -> None:
    with MemoryClient.embedded(tmp_path / "data", embedder="hash") as cm:
        for n in range(3):
            cm.retain("ops", RELEASE, fact_type="world", memory_id=f"release-{n}")
        cm.retain("ops", "Dana moved the backup job to the archive host.", memory_id="plain")
        report = cm.consolidate("ops")
    # Three typed memories ingested and the fact extracted from the plain one.
    assert report.scanned == 4
    assert len(report.observations) == 1 and report.reinforced == 3


def test_what_a_group_has_left_is_counted_per_partition() -> None:
    target = {("raw", 0): 5, ("raw", 1): 3, ("raw", 2): 0}
    assert not_yet_committed(target, {("raw", 0): 5, ("raw", 1): 3}) == 0
    assert not_yet_committed(target, {("raw", 0): 2, ("raw", 1): None}) == 6
    # Records published after the target was taken are not waited for.
    assert not_yet_committed(target, {("raw", 0): 9, ("raw", 1): 1}) == 2
    assert not_yet_committed({}, {("raw", 0): 1}) == 0


async def test_a_group_that_never_catches_up_is_reported_not_waited_for_forever(
    tmp_path: Path,
) -> None:
    async with consolidation_stack(tmp_path) as stack:
        bus: EventBus = stack.bus
        await bus.ensure_topics(STAGE1_TOPICS)
        await bus.publish(EXPERIENCE_RAW, b"{}")
        backlog = Backlog(bus, interval_s=0.01)
        target = await backlog.ends(EXPERIENCE_RAW)
        deadline = time.monotonic() + 0.1
        with pytest.raises(UnavailableError, match="'nobody-reads'; is its worker running"):
            await backlog.until_committed(EXPERIENCE_RAW, "nobody-reads", target, deadline=deadline)
