"""What a forget erases and repairs, decided from the bank's objects alone (pure)."""

from __future__ import annotations

import json

from cogsub.lifecycle.provenance import (
    Derived,
    Evidence,
    Supersession,
    closure,
    derived_from,
    erasure,
    evidence_from,
)

BANK = "b-1"
P = f"consolidation/{BANK}/"


def _derived(memory_id: str, *sources: str) -> Derived:
    return Derived(memory_id, f"{P}facts/{memory_id}.json", frozenset(sources))


def test_the_closure_follows_sources_transitively_and_nothing_else() -> None:
    derived = [
        _derived("obs-1", "fact-1", "fact-9"),
        _derived("fact-1", "raw-1"),
        _derived("pref-1", "obs-1"),
        _derived("fact-9", "raw-9"),
    ]
    assert closure("raw-1", derived) == ["raw-1", "fact-1", "obs-1", "pref-1"]
    assert closure("fact-9", derived) == ["fact-9", "obs-1", "pref-1"]
    assert closure("pref-1", derived) == ["pref-1"]


def test_provenance_is_read_from_sources_and_source_event_id() -> None:
    body = {
        "eventId": "fact-1",
        "input": {"text": "t", "structured": {"sources": ["a"], "sourceEventId": "b"}},
    }
    found = derived_from(f"{P}facts/fact-1.json", json.dumps(body).encode())
    assert found == Derived("fact-1", f"{P}facts/fact-1.json", frozenset({"a", "b"}))
    assert derived_from(f"{P}evidence/fact-1/a-0.json", json.dumps(body).encode()) is None
    assert derived_from(f"{P}facts/x.json", b"not json") is None


def test_evidence_keys_are_parsed_even_when_ids_hold_dashes() -> None:
    key = f"{P}evidence/fact-1/turn-2-b-0.json"
    assert evidence_from(BANK, key) == Evidence(key, "fact-1", "turn-2-b")
    assert evidence_from(BANK, f"{P}evidence/fact-1/no-position-x.json") is None
    assert evidence_from("other", key) is None


def test_survivors_are_repaired_and_bookkeeping_erased() -> None:
    derived = [_derived("fact-1", "raw-1"), _derived("pref-2", "raw-2")]
    supersessions = [
        Supersession(f"{P}supersessions/pref-0.json", loser="pref-0", winner="fact-1"),
        Supersession(f"{P}supersessions/fact-1.json", loser="fact-1", winner="pref-2"),
        Supersession(f"{P}supersessions/pref-3.json", loser="pref-3", winner="pref-2"),
    ]
    evidence = [
        Evidence(f"{P}evidence/fact-1/raw-5-0.json", "fact-1", "raw-5"),
        Evidence(f"{P}evidence/fact-7/raw-1-0.json", "fact-7", "raw-1"),
        Evidence(f"{P}evidence/fact-7/raw-6-0.json", "fact-7", "raw-6"),
    ]
    keys = [f"{P}consumed/raw-1.json", f"{P}consumed/raw-2.json", f"{P}epochs/00000001.json"]
    decided = erasure(
        BANK,
        "raw-1",
        seed_key="events/2026/05/20/raw-1.json",
        derived=derived,
        supersessions=supersessions,
        evidence=evidence,
        keys=keys,
    )
    assert decided.memory_ids == ("raw-1", "fact-1")
    assert decided.object_keys == (
        "events/2026/05/20/raw-1.json",
        f"{P}facts/fact-1.json",
        f"{P}evidence/fact-1/raw-5-0.json",
        f"{P}evidence/fact-7/raw-1-0.json",
        f"{P}supersessions/pref-0.json",
        f"{P}supersessions/fact-1.json",
        f"{P}consumed/raw-1.json",
    )
    assert decided.proof_recount == ("fact-7",)
    assert decided.unsupersede == ("pref-0",)
    assert decided.unlink == {"pref-2": ["fact-1"]}
