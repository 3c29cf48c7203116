"""export → import into a fresh embedded stack: the same recall answers; imports never overwrite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cogsub.core.errors import ConfigurationError, InvalidInputError
from cogsub.core.memory import FeedbackRequest, FeedbackSignal
from cogsub.index.ports import SearchFilters
from cogsub.lifecycle import Lifecycle
from tests.services.consolidation.stack import NOW, ConsolidationStack, consolidation_stack
from tests.services.lifecycle.scenario import BANK, OTHER, populate, recall_all


def lifecycle_of(stack: ConsolidationStack) -> Lifecycle:
    return Lifecycle(archive=stack.archive, index=stack.index, clock=lambda: NOW)


async def export(stack: ConsolidationStack, bank: str = BANK) -> list[bytes]:
    return [line async for line in lifecycle_of(stack).export_bank(bank)]


async def keys(stack: ConsolidationStack, prefix: str = "") -> list[str]:
    return [k async for k in stack.archive.list(prefix)]


async def test_a_bank_moves_to_a_fresh_stack_and_recalls_the_same(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path / "from") as source:
        bank = await populate(source)
        # Signals that live only in the index travel too: retrieval counts and decay.
        await source.service.feedback(
            BANK, FeedbackRequest(memory_ids=[bank.turn], signal=FeedbackSignal.HELPFUL)
        )
        assert (await source.rounds.run(BANK)).decayed > 0
        before = await recall_all(source)
        lines = await export(source)
        other_lines = await export(source, OTHER)
        source_keys = [k for k in await keys(source) if k.startswith(f"consolidation/{BANK}/")]
        source_count = await source.index.count(BANK)
    header = json.loads(lines[0])
    trailer = json.loads(lines[-1])
    assert header["format"] == "cogsub-bank-export" and header["version"] == 1
    assert header["bank_id"] == BANK and header["counts"]["memories"] == source_count
    assert trailer["end"] is True and trailer["lines"] == len(lines) - 2
    assert trailer["memories"] == source_count and trailer["skipped"] == 0
    assert not [line for line in lines if OTHER.encode() in line]
    async with consolidation_stack(tmp_path / "to") as target:
        report = await lifecycle_of(target).import_bank(lines)
        # The other bank too, so the target holds what the source did (banks past the
        # 64th share a text table, and BM25 statistics with it).
        assert (await lifecycle_of(target).import_bank(other_lines)).complete
        assert report.complete and report.conflicts == report.invalid == 0
        assert report.imported == len(lines) - 2 and report.indexed == source_count
        assert await target.index.count(BANK) == source_count
        assert [
            k for k in await keys(target) if k.startswith(f"consolidation/{BANK}/")
        ] == source_keys
        after = await recall_all(target)
        assert after == before
        flat = {hit[0] for answer in after for hit in answer}
        assert {bank.procedure_v1, bank.procedure_v2, *bank.observations, *bank.preferences} <= flat
        versions = {hit[0]: (hit[2], hit[3]) for answer in after for hit in answer}
        assert versions[bank.procedure_v1] == (1, bank.procedure_v2)
        assert versions[bank.procedure_v2][0] == 2
        doc = await target.index.get(BANK, bank.facts[0])
        source_doc_tags = json.loads(
            next(line for line in lines if bank.facts[0].encode() in line and b'"index"' in line)
        )["index"]["tags"]
        assert doc is not None and doc.tags == source_doc_tags


async def test_importing_twice_changes_nothing(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path / "from") as source:
        await populate(source)
        lines = await export(source)
    async with consolidation_stack(tmp_path / "to") as target:
        lifecycle = lifecycle_of(target)
        first = await lifecycle.import_bank(lines)
        objects = {k: await target.archive.get(k) for k in await keys(target)}
        docs = [d.model_dump() for d in await target.index.scan(_all(), size=1000)]
        second = await lifecycle.import_bank(iter(lines))
        assert second.imported == 0 and second.present == first.imported
        assert second.indexed == 0 and second.complete
        assert {k: await target.archive.get(k) for k in await keys(target)} == objects
        assert [d.model_dump() for d in await target.index.scan(_all(), size=1000)] == docs


async def test_importing_into_the_origin_finds_everything_present(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        await populate(stack)
        lines = await export(stack)
        report = await lifecycle_of(stack).import_bank(lines, bank_id=BANK)
        assert report.imported == 0 and report.present == len(lines) - 2
        assert report.conflicts == 0 and report.complete


async def test_a_conflicting_line_is_reported_and_nothing_is_overwritten(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        bank = await populate(stack)
        lines = await export(stack)
        position = next(i for i, line in enumerate(lines) if b'"key":"events/' in line)
        changed = json.loads(lines[position])
        original = await stack.archive.get(changed["key"])
        changed["object"]["input"]["text"] = "Something else entirely."
        lines[position] = json.dumps(changed).encode()
        record = next(i for i, line in enumerate(lines) if b"/supersessions/" in line)
        altered = json.loads(lines[record])
        altered["object"]["rule"] = "another rule"
        lines[record] = json.dumps(altered).encode()
        report = await lifecycle_of(stack).import_bank(lines)
        assert report.conflicts == 2 and report.invalid == 0
        assert {(p.line, p.key, p.problem) for p in report.problems} == {
            (position + 1, changed["key"], "conflict"),
            (record + 1, altered["key"], "conflict"),
        }
        assert await stack.archive.get(changed["key"]) == original
        assert bank.turn  # the bank is intact
        doc = await stack.index.get(BANK, changed["object"]["eventId"])
        assert doc is not None and doc.summary != "Something else entirely."


async def test_lines_outside_the_bank_are_invalid_and_not_written(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path / "from") as source:
        await populate(source)
        lines = await export(source)
    memory = json.loads(next(line for line in lines if b'"key":"events/' in line))
    elsewhere = {**memory, "key": "consolidation/omar/facts/x.json"}
    planted = {"key": f"audit/{BANK}/pending/x.json", "object": {"a": 1}}
    moved = {**memory, "key": "events/1999/01/01/" + memory["object"]["eventId"] + ".json"}
    bad = [json.dumps(x).encode() for x in (elsewhere, planted, moved)] + [b"not json"]
    body = [lines[0], *bad, *lines[1:-1]]  # no trailer: cut short
    async with consolidation_stack(tmp_path / "to") as target:
        report = await lifecycle_of(target).import_bank(body)
        assert report.invalid == 4 and not report.complete
        assert [p.line for p in report.problems] == [2, 3, 4, 5]
        written = await keys(target)
        assert not [k for k in written if k.startswith(("consolidation/omar/", "audit/"))]
        assert not [k for k in written if k.startswith("events/1999/")]


async def test_an_export_of_another_bank_or_without_header_is_refused(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        await populate(stack)
        lines = await export(stack)
        lifecycle = lifecycle_of(stack)
        with pytest.raises(InvalidInputError, match="another bank"):
            await lifecycle.import_bank(lines, bank_id=OTHER)
        with pytest.raises(InvalidInputError, match="header"):
            await lifecycle.import_bank(lines[1:])
        with pytest.raises(InvalidInputError, match="empty"):
            await lifecycle.import_bank([b"", b"\n"])
        version_two = json.dumps({**json.loads(lines[0]), "version": 2}).encode()
        with pytest.raises(InvalidInputError, match="version"):
            await lifecycle.import_bank([version_two, *lines[1:]])


def _all() -> SearchFilters:
    return SearchFilters(bank_id=BANK)


async def test_vectors_of_another_embedder_are_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    async with consolidation_stack(tmp_path / "from") as source:
        await populate(source)
        lines = await export(source)
    async with consolidation_stack(tmp_path / "to") as target:
        before = await keys(target)
        other = Lifecycle(archive=target.archive, index=target.index, dimension=384)
        with pytest.raises(ConfigurationError, match="same embedder"):
            await other.import_bank(lines)
        assert await keys(target) == before and await target.index.count(BANK) == 0
