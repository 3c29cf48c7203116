"""The consolidator scenario's verdict logic: what counts as lost, twice or left behind."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from benchmarks.fault_consolidator import (
    ConsolidatorFigures,
    FactCounts,
    _derived_state,
    _replayed,
    compare_facts,
    expected_evidence,
    overlapping,
    replay_differences,
    statement_events,
)
from benchmarks.fault_counts import Stores
from benchmarks.fault_drive import Row
from benchmarks.ingest import make_events

from cogsub.replay import rebuild
from tests.services.consolidation.stack import consolidation_stack
from tests.services.replay.test_replay_orphan_observation import BANK, leave_an_orphan

A, B = ("bank-0", "fact-a"), ("bank-0", "fact-b")


def _event(event_id: str, bank: str, text: str) -> dict[str, object]:
    return {
        "eventId": event_id,
        "timestamp": "2026-05-01T10:00:00.000Z",
        "type": "user_input",
        "bankId": bank,
        "input": {"text": text},
    }


def test_statement_events_keep_the_suites_ids_and_repeat_statements_per_bank() -> None:
    events = statement_events(600, seed=3)
    assert [e["eventId"] for e in events] == [e["eventId"] for e in make_events(600, seed=3)]
    assert events == statement_events(600, seed=3)  # seeded
    said = Counter((e["bankId"], e["input"]["text"]) for e in events)
    assert max(said.values()) > 1  # facts get several proofs
    assert len(said) > 100  # and there are many of them


async def test_the_same_statement_in_a_bank_is_one_fact_with_each_source_as_evidence() -> None:
    text = "Priya keeps the kayak in the attic."
    expected = await expected_evidence(
        [
            _event("e1", "bank-0", text),
            _event("e2", "bank-0", text),
            _event("e3", "bank-1", text),
            _event("e4", "bank-0", "Priya keeps the tent in the cellar."),
        ]
    )
    by_bank = Counter(bank for bank, _ in expected)
    assert by_bank == {"bank-0": 2, "bank-1": 1}
    assert sorted(map(sorted, expected.values())) == [["e1-0", "e2-0"], ["e3-0"], ["e4-0"]]


async def test_content_that_states_nothing_expects_no_fact() -> None:
    assert await expected_evidence([_event("e1", "bank-0", "Thanks so much!")]) == {}


def test_facts_as_stated_compare_clean() -> None:
    expected = {A: frozenset({"e1-0", "e2-0"}), B: frozenset({"e3-0"})}
    counts = compare_facts(expected, {A: 2, B: 1}, expected)
    assert counts == FactCounts(expected=2, indexed=2)


def test_a_fact_never_indexed_is_missing() -> None:
    expected = {A: frozenset({"e1-0"}), B: frozenset({"e3-0"})}
    assert compare_facts(expected, {A: 1}, expected).missing == 1


def test_a_source_counted_twice_is_extra_evidence_and_a_wrong_proof_count() -> None:
    expected = {A: frozenset({"e1-0"})}
    counts = compare_facts(expected, {A: 2}, {A: frozenset({"e1-0", "e1-1"})})
    assert counts.evidence_extra == 1
    assert counts.proofs_wrong == 0  # the count matches the objects; the objects are wrong
    assert compare_facts(expected, {A: 2}, expected).proofs_wrong == 1


def test_a_lost_source_is_missing_evidence() -> None:
    expected = {A: frozenset({"e1-0", "e2-0"})}
    counts = compare_facts(expected, {A: 1}, {A: frozenset({"e1-0"})})
    assert (counts.evidence_missing, counts.proofs_wrong) == (1, 0)


def test_a_fact_no_acknowledged_event_states_is_unexpected() -> None:
    counts = compare_facts({}, {A: 1}, {A: frozenset({"x-0"})})
    assert (counts.unexpected, counts.evidence_extra) == (1, 1)


def test_observations_sharing_a_source_in_a_bank_overlap() -> None:
    disjoint = {"bank-0": [frozenset({"a", "b"}), frozenset({"c"})], "bank-1": [frozenset({"a"})]}
    assert overlapping(disjoint) == 0
    stale = {"bank-0": [frozenset({"a", "b"}), frozenset({"a", "b", "c"}), frozenset({"d"})]}
    assert overlapping(stale) == 2


def _clean() -> ConsolidatorFigures:
    return ConsolidatorFigures(
        final_lag=0,
        facts=FactCounts(expected=5, indexed=5),
        dead_lettered=1,
        dead_letters_expected=1,
        stopped_cleanly=True,
        replay_differs=0,
    )


def test_clean_figures_pass_and_each_defect_fails_with_its_note() -> None:
    assert _clean().ok and _clean().problems() == []
    defects = [
        replace(_clean(), final_lag=3),
        replace(_clean(), final_lag=None),
        replace(_clean(), facts=FactCounts(expected=5, indexed=4, missing=1)),
        replace(_clean(), facts=FactCounts(expected=5, indexed=5, evidence_extra=1)),
        replace(_clean(), facts=FactCounts(expected=5, indexed=5, proofs_wrong=1)),
        replace(_clean(), overlapping=2),
        replace(_clean(), derived_unindexed=1),
        replace(_clean(), replay_differs=1),
        replace(_clean(), replay_differs=None),
        replace(_clean(), replay_overlapping=2),
        replace(_clean(), derived_unannounced=1),
        replace(_clean(), dead_lettered=2),
        replace(_clean(), stopped_cleanly=False),
    ]
    for figures in defects:
        assert not figures.ok, figures
        assert figures.problems(), figures


def test_an_observation_archived_never_indexed_is_no_defect_on_its_own() -> None:
    """Replay's agreement is the guarantee; such orphans are only counted."""
    assert replace(_clean(), observations_unindexed=3).ok


def test_live_observations_of_one_index_only_are_replay_differences() -> None:
    running = {"bank-0": {"o1", "o2"}, "bank-1": {"o3"}}
    assert replay_differences(running, {"bank-0": {"o2", "o1"}, "bank-1": {"o3"}}) == 0
    assert replay_differences(running, {"bank-0": {"o1", "o2", "orphan"}, "bank-1": {"o3"}}) == 1
    assert replay_differences(running, {"bank-0": {"o1"}}) == 2


async def test_the_replay_check_passes_with_an_orphan_and_fails_without_the_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with consolidation_stack(tmp_path / "stack") as stack:
        orphan, _ = await leave_an_orphan(stack)
        stores = Stores(stack.bus, stack.archive, stack.index)
        running = await _derived_state(stores, [BANK])
        assert (BANK, orphan) in running.archived and (BANK, orphan) not in running.indexed
        replayed = await _replayed(stores, [BANK])
        assert replay_differences(running.live, replayed.live) == 0
        assert overlapping(replayed.observations) == 0

        async def without_the_rule(*_: object) -> int:
            return 0

        # Replay as it was before the rule: the orphan comes back live beside its successor.
        monkeypatch.setattr(rebuild, "supersede_contained", without_the_rule)
        replayed = await _replayed(stores, [BANK])
        assert replay_differences(running.live, replayed.live) == 1
        assert overlapping(replayed.observations) == 2


def test_no_facts_at_all_is_not_a_pass() -> None:
    assert not replace(_clean(), facts=FactCounts()).ok


def test_a_failed_consolidator_fails_the_scenarios_row() -> None:
    row = Row("consolidator-sigkill", produced=12, archived=10, indexed=10, dead_lettered=2)
    row.drained = True
    row.consolidator = _clean()
    assert row.ok
    row.consolidator = replace(_clean(), overlapping=2)
    assert not row.ok
