"""Decay per epoch lowers what nobody uses, once per epoch, never deleting; use restores it."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from cogsub.consolidation import ConsolidationPolicy
from cogsub.consolidation import decay_pass as decay_pass_module
from cogsub.consolidation.decay import epoch_of
from cogsub.core.derived import decay_pages_prefix
from cogsub.core.documents import IndexDocument
from cogsub.core.events import FactType, format_timestamp
from cogsub.core.memory import FeedbackRequest, FeedbackSignal, RetainRequest
from cogsub.index.ports import DecayedPage, DecayStep, DocumentPatch, MemoryIndex, SearchFilters
from tests.services.consolidation.stack import NOW, ConsolidationStack, consolidation_stack

BANK = "decay"


def test_epochs_count_from_a_fixed_origin() -> None:
    day = timedelta(days=1)
    start = datetime(2020, 1, 1, tzinfo=UTC)
    assert epoch_of(start, day) == 0
    assert epoch_of(start + day - timedelta(microseconds=1), day) == 0
    assert epoch_of(start + 3 * day, day) == 3


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


_UNRELATED = [
    "The staging cluster is in Frankfurt.",
    "Invoices are generated on the first Monday.",
    "Priya owns the billing dashboards.",
    "Backups rotate every fourteen days.",
    "The mobile app ships on Thursdays.",
    "Legal reviews contracts above ten thousand euros.",
    "Coffee machines on floor three are broken.",
]


async def _retain_old_unrelated(stack: ConsolidationStack) -> None:
    """``_UNRELATED`` as world memories of three days ago, and what a round derives first."""
    for text in _UNRELATED:
        request = RetainRequest(
            content=text, fact_type=FactType.WORLD, timestamp=NOW - timedelta(days=3), wait=True
        )
        await stack.service.retain(BANK, request)
    await stack.rounds.run(BANK, decay=False)  # whatever else a round derives, first


async def _all_memories(stack: ConsolidationStack) -> list[IndexDocument]:
    return await stack.index.scan(SearchFilters(bank_id=BANK), size=100)


async def _old_memories(stack: ConsolidationStack) -> list[IndexDocument]:
    """The bank's memories from before the current epoch (every one of ``_UNRELATED``)."""
    docs = await _all_memories(stack)
    old = [d for d in docs if d.timestamp < format_timestamp(NOW - timedelta(days=1))]
    assert len(old) >= len(_UNRELATED)
    return old


class _StopsAfterPages:
    """The index, until ``pages`` pages of decay are written; then the pass is cut short."""

    def __init__(self, index: MemoryIndex, pages: int) -> None:
        self._index = index
        self.pages_left = pages

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)

    async def decay_page(
        self, bank_id: str, step: DecayStep, *, size: int, after: str | None = None
    ) -> DecayedPage:
        if self.pages_left == 0:
            raise asyncio.CancelledError  # as a stopping worker cancels its round
        self.pages_left -= 1
        return await self._index.decay_page(bank_id, step, size=size, after=after)


async def test_a_pass_cut_short_resumes_after_its_last_page_and_decays_each_memory_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(decay_pass_module, "DECAY_PAGE", 2)
    monkeypatch.setattr(decay_pass_module, "DECAY_RECORD_EVERY_S", 0.0)  # a record after each page
    async with consolidation_stack(tmp_path) as stack:
        await _retain_old_unrelated(stack)  # whatever else a round derives, first
        cut = _StopsAfterPages(stack.index, pages=2)
        with pytest.raises(asyncio.CancelledError):
            await stack.round_over(cast(MemoryIndex, cut), stack.archive).run(BANK)
        pages = decay_pages_prefix(BANK, epoch_of(NOW, stack.rounds.policy.epoch))
        assert len([k async for k in stack.archive.list(pages)]) == 2

        report = await stack.rounds.run(BANK)
        old = await _old_memories(stack)
        # Once each: the first two pages are not decayed again (0.81) on resuming.
        assert [d.decay_factor for d in old] == [pytest.approx(0.9)] * len(old)
        first_two_pages = sorted(d.event_id for d in await _all_memories(stack))[:4]
        done_before = len([d for d in old if d.event_id in first_two_pages])
        assert report.decayed == len(old) - done_before > 0
        assert [k async for k in stack.archive.list(pages)] == []  # gone once the epoch is done


async def test_a_pass_records_where_it_is_only_once_the_interval_has_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(decay_pass_module, "DECAY_PAGE", 2)
    monkeypatch.setattr(decay_pass_module, "DECAY_RECORD_EVERY_S", 3600.0)
    async with consolidation_stack(tmp_path) as stack:
        await _retain_old_unrelated(stack)
        cut = _StopsAfterPages(stack.index, pages=3)
        with pytest.raises(asyncio.CancelledError):
            await stack.round_over(cast(MemoryIndex, cut), stack.archive).run(BANK)
        pages = decay_pages_prefix(BANK, epoch_of(NOW, stack.rounds.policy.epoch))
        assert [k async for k in stack.archive.list(pages)] == []  # no archive write per page
        # The cost of that: without a record the pass starts over, decaying those pages again.
        report = await stack.rounds.run(BANK)
        assert report.decayed == len(await _old_memories(stack))


class _CountsDecayPages:
    """The index, noting what each page of decay did."""

    def __init__(self, index: MemoryIndex) -> None:
        self._index = index
        self.pages: list[tuple[int, DecayedPage]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)

    async def decay_page(
        self, bank_id: str, step: DecayStep, *, size: int, after: str | None = None
    ) -> DecayedPage:
        page = await self._index.decay_page(bank_id, step, size=size, after=after)
        self.pages.append((size, page))
        return page


async def test_a_pass_decays_every_old_memory_a_page_at_a_time_and_leaves_new_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(decay_pass_module, "DECAY_PAGE", 3)
    async with consolidation_stack(tmp_path) as stack:
        await _retain_old_unrelated(stack)
        for text in ("The new cluster is in Dublin.", "Standups moved to ten."):
            fresh = RetainRequest(content=text, fact_type=FactType.WORLD, timestamp=NOW, wait=True)
            await stack.service.retain(BANK, fresh)
        counting = _CountsDecayPages(stack.index)
        report = await stack.round_over(cast(MemoryIndex, counting), stack.archive).run(BANK)
        old = await _old_memories(stack)
        assert [d.decay_factor for d in old] == [pytest.approx(0.9)] * len(old)
        new = [d for d in await _all_memories(stack) if d.event_id not in {o.event_id for o in old}]
        assert len(new) == 2 and all(d.decay_factor == 1.0 for d in new)  # of this epoch
        assert sum(page.decayed for _, page in counting.pages) == report.decayed == len(old)
        total = len(old) + len(new)
        assert [size for size, _ in counting.pages] == [3] * (math.ceil(total / 3) + 1)
        assert counting.pages[-1][1] == DecayedPage(0, None)


async def test_a_round_bounded_by_max_scan_reads_the_most_alive_memories(tmp_path: Path) -> None:
    policy = ConsolidationPolicy(max_scan=3)
    async with consolidation_stack(tmp_path, policy=policy) as stack:
        ids: dict[str, list[str]] = {"release": [], "invoices": []}
        for day, (topic, text) in enumerate(
            [
                ("release", "Jane ships the billing release on Fridays."),
                ("invoices", "Invoices are generated on the first Monday."),
                ("release", "Jane ships the billing release on Fridays."),
                ("invoices", "Invoices are generated on the first Monday."),
            ]
        ):
            request = RetainRequest(
                content=text,
                fact_type=FactType.WORLD,
                timestamp=NOW - timedelta(days=9 - day),
                wait=True,
            )
            ids[topic].append((await stack.service.retain(BANK, request)).memory_id)
        unrelated = RetainRequest(
            content="Priya owns the dashboards.", fact_type=FactType.WORLD, wait=True
        )
        await stack.service.retain(BANK, unrelated)

        async def set_decay(topic: str, factor: float) -> None:
            patches = {i: DocumentPatch(decay_factor=factor) for i in ids[topic]}
            assert await stack.index.update_many(BANK, patches) == 2

        await set_decay("invoices", 0.2)  # the release pair and the unrelated one fill the slice
        first = await stack.rounds.run(BANK, decay=False)
        assert not first.complete and first.scanned == 3
        (release,) = first.observations
        await set_decay("invoices", 1.0)
        await set_decay("release", 0.2)
        second = await stack.rounds.run(BANK, decay=False)
        (invoices,) = second.observations
        assert invoices != release
        for obs_id, topic in ((release, "release"), (invoices, "invoices")):
            record = await stack.service.get_memory(BANK, obs_id)
            assert record.archived_event["input"]["structured"]["sources"] == sorted(ids[topic])
