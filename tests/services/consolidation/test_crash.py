"""A round that dies between any two writes is completed by the next one, nothing twice."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from cogsub.archive.filesystem import FilesystemArchive
from cogsub.consolidation import ConsolidationRound
from cogsub.core.documents import IndexDocument
from cogsub.core.errors import UnavailableError
from cogsub.core.events import FactType
from cogsub.core.memory import RecallRequest
from cogsub.index.ports import DecayedPage, DecayStep, DocumentPatch
from cogsub.index.sqlite import SqliteMemoryIndex
from tests.services.consolidation.stack import (
    ConsolidationStack,
    consolidation_stack,
    seed_ops_bank,
)

BANK = "ops"


class Fuse:
    """Counts writes and blows (as a crash would stop the round) before the ``n``-th one."""

    def __init__(self, n: int) -> None:
        self.left = n
        self.count = 0

    def spend(self) -> None:
        self.count += 1
        self.left -= 1
        if self.left < 0:
            raise UnavailableError("crash injected before this write")


class CrashingIndex:
    """The real index; every write goes through the fuse first."""

    def __init__(self, inner: SqliteMemoryIndex, fuse: Fuse) -> None:
        self._inner = inner
        self._fuse = fuse

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def upsert(self, documents: Sequence[IndexDocument]) -> None:
        self._fuse.spend()
        await self._inner.upsert(documents)

    async def update(self, bank_id: str, event_id: str, patch: DocumentPatch) -> IndexDocument:
        self._fuse.spend()
        return await self._inner.update(bank_id, event_id, patch)

    async def update_many(self, bank_id: str, patches: Mapping[str, DocumentPatch]) -> int:
        self._fuse.spend()
        return await self._inner.update_many(bank_id, patches)

    async def decay_page(
        self, bank_id: str, step: DecayStep, *, size: int, after: str | None = None
    ) -> DecayedPage:
        self._fuse.spend()
        return await self._inner.decay_page(bank_id, step, size=size, after=after)


class CrashingArchive:
    """The real archive; every ``put_once`` goes through the fuse first."""

    def __init__(self, inner: FilesystemArchive, fuse: Fuse) -> None:
        self._inner = inner
        self._fuse = fuse

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def put_once(
        self, key: str, body: bytes, *, content_type: str = "application/json"
    ) -> None:
        self._fuse.spend()
        await self._inner.put_once(key, body, content_type=content_type)


def _crashing_round(stack: ConsolidationStack, fuse: Fuse) -> ConsolidationRound:
    return stack.round_over(
        CrashingIndex(stack.index, fuse),  # type: ignore[arg-type]
        CrashingArchive(stack.archive, fuse),  # type: ignore[arg-type]
    )


async def _seed(stack: ConsolidationStack) -> None:
    await seed_ops_bank(stack, BANK)


async def _state(stack: ConsolidationStack) -> tuple[list[str], dict[str, list[str]]]:
    objects = [k async for k in stack.archive.list("consolidation/")]
    docs = {}
    for fact_type in (FactType.OBSERVATION, FactType.PREFERENCE, FactType.PROCEDURE):
        found = await stack.service.recall(
            BANK,
            RecallRequest(
                query="api dashboard deploy ships",
                types=[fact_type],
                k=20,
                all_versions=True,
                reinforce=False,
            ),
        )
        for hit in found.results:
            docs[hit.id] = sorted(
                t for t in hit.tags if t.startswith(("superseded-by:", "supersedes:", "proof:"))
            )
    return [k.split("/", 2)[2] for k in objects], docs


@pytest.mark.slow
async def test_a_crash_at_any_write_is_completed_by_the_next_round(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path / "clean") as clean:
        await _seed(clean)
        reference = await clean.rounds.run(BANK, decay=False)
        expected = await _state(clean)
    async with consolidation_stack(tmp_path / "count") as counting:
        await _seed(counting)
        probe = Fuse(10_000)
        await _crashing_round(counting, probe).run(BANK, decay=False)
    # archive: 2 repairs/preferences + 1 observation + 2 consumed marks + 2 supersessions;
    # index: those 3 memories + 2 x 2 supersession tags + 3 reinforcements
    assert probe.count >= 15
    for crash_at in range(probe.count):
        async with consolidation_stack(tmp_path / f"crash-{crash_at}") as stack:
            await _seed(stack)
            with pytest.raises(UnavailableError):
                await _crashing_round(stack, Fuse(crash_at)).run(BANK, decay=False)
            resumed = await stack.rounds.run(BANK, decay=False)
            assert await _state(stack) == expected, f"crash before write {crash_at}"
            again = await stack.rounds.run(BANK, decay=False)
            assert again.observations == again.preferences == again.procedures == []
    assert reference.procedures and reference.preferences and reference.observations
    assert resumed.complete
