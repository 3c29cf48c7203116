"""A rebuilt index keeps what consolidation derived: memories, supersession, proof counts."""

from __future__ import annotations

from pathlib import Path

from cogsub.archive.filesystem import FilesystemArchive
from cogsub.core.events import FactType
from cogsub.core.memory import RecallRequest
from cogsub.core.topics import EXPERIENCE_ENRICHED
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.replay import replay
from tests.services.consolidation.stack import (
    ConsolidationStack,
    consolidation_stack,
    ops_memory,
    seed_ops_bank,
)

BANK = "ops"
QUERIES = [
    ("deploy the api restart", [FactType.PROCEDURE]),
    ("which dashboard for incidents", [FactType.PREFERENCE]),
    ("when does the api team ship", [FactType.OBSERVATION]),
    ("where does the sister live", [FactType.WORLD]),
]


async def _seed(stack: ConsolidationStack) -> None:
    await seed_ops_bank(stack, BANK)
    for days, text in (
        (4, "Caroline: My sister lives in Lisbon."),
        (3, "Caroline: my sister lives in Lisbon!"),
    ):
        await stack.service.retain(BANK, ops_memory(days, text, None))
    consumer = stack.bus.consumer([EXPERIENCE_ENRICHED], group="replay-test")
    try:
        records = []
        while len(records) < 9:
            records += await consumer.poll(max_records=50, timeout_s=2.0)
    finally:
        await consumer.close()
    for record in records:
        await stack.facts.handle(record.value)
    await stack.rounds.run(BANK, decay=False)


async def _answers(stack: ConsolidationStack) -> list[list[tuple[object, ...]]]:
    found = []
    for query, types in QUERIES:
        for every in (False, True):
            result = await stack.service.recall(
                BANK, RecallRequest(query=query, types=types, all_versions=every, reinforce=False)
            )
            found.append(
                [
                    (h.id, h.text, h.version, h.superseded_by, h.proof_count, tuple(h.supersedes))
                    for h in result.results
                ]
            )
    return found


async def test_replay_rebuilds_derived_memories_and_their_provenance(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        await _seed(stack)
        before = await _answers(stack)
        count = await stack.index.count(BANK)
    assert any(hit[3] for answer in before for hit in answer)  # something was superseded
    assert any(hit[4] == 2 for answer in before for hit in answer)  # a merged fact
    _drop_index(tmp_path)
    archive = FilesystemArchive(tmp_path / "archive")
    index = SqliteMemoryIndex(tmp_path / "index.sqlite3")
    try:
        report = await replay(archive, index)
        assert report.indexed == count and report.provenance > 0
        again = await replay(archive, index)
        assert (again.indexed, again.provenance) == (count, report.provenance)  # the same rebuild
    finally:
        await index.close()
        await archive.close()
    async with consolidation_stack(tmp_path) as stack:
        assert await _answers(stack) == before


def _drop_index(root: Path) -> None:
    for path in root.glob("index.sqlite3*"):
        path.unlink()
