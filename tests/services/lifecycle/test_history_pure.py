"""The pure half of history: records, links, version lines and signals from what was read."""

from __future__ import annotations

from typing import Any

from cogsub.core.documents import IndexDocument
from cogsub.core.events import FactType
from cogsub.lifecycle.history import (
    NEWER_VERSION_RULE,
    Read,
    linked,
    newer_version_record,
    record_from,
    signals_of,
    version_line,
)


def doc(memory_id: str, *, tags: list[str] | None = None, **fields: Any) -> IndexDocument:
    values: dict[str, Any] = {
        "event_id": memory_id,
        "timestamp": "2026-03-01T00:00:00.000Z",
        "event_type": "user_input",
        "session_id": None,
        "summary": memory_id,
        "embedding": [],
        "importance_score": 0.5,
        "reward_score": 0.4,
        "confidence": 0.6,
        "object_storage_key": f"k/{memory_id}",
        "tags": tags or [],
        "bank_id": "b",
        "fact_type": FactType.WORLD,
    }
    return IndexDocument(**{**values, **fields})


def event(memory_id: str, text: str, *, derived: bool = False, **structured: Any) -> dict[str, Any]:
    return {
        "eventId": memory_id,
        "type": "consolidation_output" if derived else "user_input",
        "timestamp": "2026-03-01T00:00:00.000Z",
        "input": {"text": text, **({"structured": structured} if structured else {})},
    }


def test_a_record_reads_the_archive_s_camel_case_and_tolerates_no_rule() -> None:
    body = {"memoryId": "a", "supersededBy": "b", "validTo": "2026-03-02T00:00:00.000Z"}
    record = record_from({**body, "rule": "update"})
    assert (record.memory_id, record.superseded_by, record.rule) == ("a", "b", "update")
    assert record_from(body).rule == "unrecorded" and record.valid_to == body["validTo"]


def test_a_link_names_the_raw_event_behind_it() -> None:
    fact = Read("f1", doc("f1"), event("f1", "fact", derived=True, sourceEventId="raw-1"))
    retained = Read("raw-1", doc("raw-1"), event("raw-1", "turn"))
    observation = Read("o1", doc("o1"), event("o1", "obs", derived=True, sources=["f1"]))
    assert linked(fact, "source").event_id == "raw-1"
    assert linked(retained, "evidence").event_id == "raw-1"
    assert linked(observation, "source").event_id is None
    gone = linked(Read("x", None, None), "correction")
    assert (gone.text, gone.timestamp, gone.event_id, gone.relation) == (
        None,
        None,
        None,
        "correction",
    )


def test_a_version_line_marks_the_newest_live_version_current() -> None:
    line = [
        Read(f"v{n}", doc(f"v{n}", tags=["procedure:p", f"version:{n}"]), event(f"v{n}", f"t{n}"))
        for n in (1, 2, 3)
    ]
    replaced = {
        "v1": newer_version_record(line[0].doc, line[1].doc),  # type: ignore[arg-type]
        "v2": record_from({"memoryId": "v2", "supersededBy": "v3", "rule": "update"}),
    }
    versions = version_line(line, replaced)
    assert [(v.version, v.superseded_by, v.current) for v in versions] == [
        (1, "v2", False),
        (2, "v3", False),
        (3, None, True),
    ]
    assert (
        replaced["v1"].rule == NEWER_VERSION_RULE
        and replaced["v1"].valid_to == line[1].doc.timestamp
    )  # type: ignore[union-attr]
    forgotten_newest = [*line[:2], Read("v3", doc("v3", tags=["procedure:p", "version:3"]), None)]
    after = version_line(forgotten_newest, {"v1": replaced["v1"]})
    assert [v.current for v in after] == [False, True, False]


def test_an_update_chain_is_numbered_in_order_when_no_version_tag_says() -> None:
    line = [Read(m, doc(m), event(m, m)) for m in ("a", "b")]
    versions = version_line(line, {"a": record_from({"memoryId": "a", "supersededBy": "b"})})
    assert [(v.memory_id, v.version, v.current) for v in versions] == [
        ("a", 1, False),
        ("b", 2, True),
    ]


def test_signals_count_proof_only_for_what_carries_it() -> None:
    assert signals_of(doc("a")).proof_count is None
    proved = signals_of(doc("o", tags=["proof:4", "superseded-by:z"], decay_factor=0.3))
    assert (proved.proof_count, proved.superseded, proved.decay_factor) == (4, True, 0.3)
    assert (proved.reward_score, proved.confidence) == (0.4, 0.6)
