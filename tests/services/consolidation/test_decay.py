"""Decay per epoch lowers what nobody uses, once per epoch, never deleting; use restores it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cogsub.consolidation.decay import decayed, epoch_of, replay_order
from cogsub.core.events import FactType
from cogsub.core.memory import FeedbackRequest, FeedbackSignal, RetainRequest
from tests.services.consolidation.stack import NOW, consolidation_stack

BANK = "decay"


def test_decay_multiplies_by_the_rate_down_to_the_floor() -> None:
    assert decayed(1.0, rate=0.9, floor=0.05) == pytest.approx(0.9)
    assert decayed(0.9, rate=0.9, floor=0.05, epochs=2) == pytest.approx(0.729)
    assert decayed(0.06, rate=0.5, floor=0.05) == 0.05
    assert decayed(0.05, rate=0.5, floor=0.05) == 0.05
    assert decayed(0.01, rate=0.5, floor=0.05) == 0.01  # below the floor already: left alone


def test_epochs_count_from_a_fixed_origin() -> None:
    day = timedelta(days=1)
    start = datetime(2020, 1, 1, tzinfo=UTC)
    assert epoch_of(start, day) == 0
    assert epoch_of(start + day - timedelta(microseconds=1), day) == 0
    assert epoch_of(start + 3 * day, day) == 3


def test_replay_order_is_most_alive_then_most_important() -> None:
    items = [(0.5, 0.9, "a"), (1.0, 0.1, "b"), (1.0, 0.7, "c"), (0.5, 0.9, "0")]
    ordered = sorted(items, key=lambda i: replay_order(*i))
    assert [i[2] for i in ordered] == ["c", "b", "0", "a"]


async def test_one_epoch_of_decay_per_epoch_and_use_restores(tmp_path: Path) -> None:
    clock = {"now": NOW}
    async with consolidation_stack(tmp_path, clock=lambda: clock["now"]) as stack:
        old = await stack.service.retain(
            BANK,
            RetainRequest(
                content="The staging cluster is in Frankfurt.",
                fact_type=FactType.WORLD,
                timestamp=NOW - timedelta(days=3),
                wait=True,
            ),
        )
        fresh = await stack.service.retain(
            BANK,
            RetainRequest(
                content="The new cluster is in Dublin.",
                fact_type=FactType.WORLD,
                timestamp=NOW,
                wait=True,
            ),
        )

        async def factor(memory_id: str) -> float:
            doc = await stack.index.get(BANK, memory_id)
            assert doc is not None
            return doc.decay_factor

        first = await stack.rounds.run(BANK)
        assert first.decayed == 1
        assert await factor(old.memory_id) == pytest.approx(0.9)
        assert await factor(fresh.memory_id) == 1.0  # new this epoch
        await stack.rounds.run(BANK)  # the same epoch: no second decay
        assert await factor(old.memory_id) == pytest.approx(0.9)
        clock["now"] = NOW + timedelta(days=1)
        await stack.rounds.run(BANK)
        assert await factor(old.memory_id) == pytest.approx(0.81)
        assert await factor(fresh.memory_id) == pytest.approx(0.9)
        await stack.service.feedback(
            BANK, FeedbackRequest(memory_ids=[old.memory_id], signal=FeedbackSignal.USED)
        )
        assert await factor(old.memory_id) == 1.0
        record = await stack.service.get_memory(BANK, old.memory_id)
        assert record.text == "The staging cluster is in Frankfurt."  # the archive is untouched
