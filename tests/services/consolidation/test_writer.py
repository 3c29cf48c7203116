"""DerivedWriter's marks: they change tags only, whatever was written since they read."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from cogsub.consolidation import DerivedWriter
from cogsub.core import IndexDocument
from cogsub.core.memory import RetainRequest
from cogsub.index.ports import DocumentPatch
from cogsub.index.sqlite import SqliteMemoryIndex
from tests.services.consolidation.stack import NOW, consolidation_stack

BANK = "writer-bank"


class DecaysAfterReading(SqliteMemoryIndex):
    """An index on which a round's decay lands right after each read: the race, made certain."""

    async def get(self, bank_id: str, event_id: str) -> IndexDocument | None:
        found = await super().get(bank_id, event_id)
        if found is not None:
            factor = found.decay_factor / 2
            await self.update(bank_id, event_id, DocumentPatch(decay_factor=factor))
        return found


async def test_a_supersession_keeps_signals_written_after_its_reads(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        for name, colour in (("old", "red"), ("new", "blue")):
            request = RetainRequest(
                memory_id=f"{BANK}-{name}",
                content=f"Use the {colour} dashboard.",
                tags=["pref"],
                wait=True,
            )
            await stack.service.retain(BANK, request)
        index = DecaysAfterReading(tmp_path / "index.sqlite3")
        try:
            writer = DerivedWriter(
                bus=stack.bus, archive=stack.archive, index=index, embedder=stack.embedder
            )
            valid_to = NOW - timedelta(days=1)
            newly = await writer.supersede(
                BANK, f"{BANK}-old", f"{BANK}-new", valid_to=valid_to, rule="test"
            )
            loser = await stack.index.get(BANK, f"{BANK}-old")
            winner = await stack.index.get(BANK, f"{BANK}-new")
        finally:
            await index.close()
    assert newly
    assert loser is not None and winner is not None
    # One read each, so one decay each landed in between: halved, not reset to 1.0.
    assert (loser.decay_factor, winner.decay_factor) == (0.5, 0.5)
    assert f"superseded-by:{BANK}-new" in loser.tags and "pref" in loser.tags
    assert any(tag.startswith("valid-to:") for tag in loser.tags)
    assert winner.tags == ["pref", f"supersedes:{BANK}-old"]
