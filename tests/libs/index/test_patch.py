"""The rules the index adapters share: ``DocumentPatch``, ``DecayStep``, ``replay_order``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cogsub.core.documents import IndexDocument
from cogsub.core.errors import InvalidInputError
from cogsub.core.events import FactType
from cogsub.index.ports import DecayStep, DocumentPatch, replay_order


def _doc(tags: list[str] | None = None, **fields: object) -> IndexDocument:
    return IndexDocument.model_validate(
        {
            "event_id": "e1",
            "timestamp": "2026-05-08T22:31:25.237Z",
            "event_type": "user_input",
            "session_id": "s1",
            "summary": "Design a memory system.",
            "embedding": [0.25] * 4,
            "importance_score": 0.6,
            "reward_score": 0.81,
            "confidence": 0.72,
            "object_storage_key": "events/2026/05/08/e1.json",
            "tags": ["memory"] if tags is None else tags,
            "bank_id": "bank-a",
            "fact_type": FactType.EXPERIENCE,
            **fields,
        }
    )


def test_a_patch_changes_only_the_named_signals() -> None:
    doc = _doc()
    patched = DocumentPatch(importance_score=0.9, decay_factor=0.5).applied_to(doc)
    assert patched == doc.model_copy(update={"importance_score": 0.9, "decay_factor": 0.5})
    assert DocumentPatch().applied_to(doc) == doc


def test_a_patch_sets_then_increments_the_retrieval_count() -> None:
    doc = _doc(retrieval_count=4)
    assert DocumentPatch(retrieval_count_increment=3).applied_to(doc).retrieval_count == 7
    both = DocumentPatch(retrieval_count=10, retrieval_count_increment=1)
    assert both.applied_to(doc).retrieval_count == 11


def test_tags_under_a_prefix_are_replaced_and_the_rest_kept_in_order() -> None:
    doc = _doc(["proof:1", "billing", "proof:2", "derived:fact"])
    patch = DocumentPatch(add_tags=("proof:3", "billing"), drop_tags_under=("proof:",))
    assert patch.applied_to(doc).tags == ["billing", "derived:fact", "proof:3"]
    assert DocumentPatch(add_tags=("new",)).applied_to(doc).tags == [*doc.tags, "new"]


@given(
    tags=st.lists(st.sampled_from(["proof:1", "proof:2", "a", "b", "ab"]), max_size=6),
    add=st.lists(st.sampled_from(["proof:9", "a", "c"]), max_size=3),
    prefixes=st.lists(st.sampled_from(["proof:", "a", "x"]), max_size=2),
)
def test_a_tag_patch_is_with_tags(tags: list[str], add: list[str], prefixes: list[str]) -> None:
    doc = _doc(list(dict.fromkeys(tags)))
    patched = DocumentPatch(add_tags=tuple(add), drop_tags_under=tuple(prefixes)).applied_to(doc)
    kept = [t for t in doc.tags if not any(t.startswith(p) for p in prefixes)]
    assert patched.tags == list(dict.fromkeys([*kept, *add]))
    assert patched.model_copy(update={"tags": doc.tags}) == doc


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        (DocumentPatch(importance_score=1.5), "importance_score"),
        (DocumentPatch(decay_factor=-0.1), "decay_factor"),
        (DocumentPatch(retrieval_count_increment=-1), "retrieval_count"),
    ],
)
def test_a_patch_out_of_bounds_is_invalid_input(patch: DocumentPatch, field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        patch.applied_to(_doc())
    assert [p.field for p in caught.value.problems] == [field]


def test_replay_order_is_most_alive_then_most_important_then_id() -> None:
    items = [(0.5, 0.9, "a"), (1.0, 0.1, "b"), (1.0, 0.7, "c"), (0.5, 0.9, "0")]
    docs = [_doc(decay_factor=d, importance_score=i, event_id=e) for d, i, e in items]
    assert [d.event_id for d in sorted(docs, key=replay_order)] == ["c", "b", "0", "a"]


_WHENEVER = datetime(2026, 5, 8, tzinfo=UTC)


def test_a_decay_step_multiplies_by_the_rate_down_to_the_floor() -> None:
    step = DecayStep(rate=0.9, floor=0.05, before=_WHENEVER)
    assert step.applied_to(1.0) == pytest.approx(0.9)
    assert step.applied_to(step.applied_to(0.9)) == pytest.approx(0.729)
    assert DecayStep(rate=0.5, floor=0.05, before=_WHENEVER).applied_to(0.06) == 0.05
    assert step.applied_to(0.05) == 0.05
    assert step.applied_to(0.01) == 0.01  # below the floor already: left alone


@pytest.mark.parametrize(
    ("rate", "floor", "field"),
    [(0.0, 0.05, "rate"), (1.5, 0.05, "rate"), (0.9, -0.1, "floor"), (0.9, 1.1, "floor")],
)
def test_a_decay_step_out_of_range_names_its_field(rate: float, floor: float, field: str) -> None:
    with pytest.raises(InvalidInputError) as raised:
        DecayStep(rate=rate, floor=floor, before=_WHENEVER)
    assert [problem.field for problem in raised.value.problems] == [field]


@given(
    factor=st.floats(0.0, 1.0),
    rate=st.floats(0.01, 1.0),
    floor=st.floats(0.0, 1.0),
)
def test_a_decay_step_never_raises_a_factor_nor_sinks_it_below_the_floor(
    factor: float, rate: float, floor: float
) -> None:
    after = DecayStep(rate=rate, floor=floor, before=_WHENEVER).applied_to(factor)
    assert after <= factor
    assert after >= min(factor, floor)
    assert 0.0 <= after <= 1.0
