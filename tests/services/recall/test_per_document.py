"""PerDocument: worked out once per live document object, and nothing kept once it is gone."""

from __future__ import annotations

import gc

from cogsub.core import IndexDocument
from cogsub.recall.per_document import PerDocument
from tests.services.recall.docs import doc


def _counting() -> tuple[PerDocument[str], list[str]]:
    asked: list[str] = []

    def work(document: IndexDocument) -> str:
        asked.append(document.event_id)
        return document.summary.upper()

    return PerDocument(work), asked


def test_the_same_document_object_is_worked_out_once() -> None:
    memo, asked = _counting()
    first = doc("m1", text="Caroline: hi")
    assert [memo(first), memo(first)] == ["CAROLINE: HI", "CAROLINE: HI"]
    assert asked == ["m1"]


def test_an_equal_document_that_is_another_object_is_worked_out_again() -> None:
    # A row decoded again (it changed) is a new object: what was kept must not answer for it.
    memo, asked = _counting()
    first = doc("m1", text="old words")
    second = doc("m1", text="new words")
    assert (memo(first), memo(second)) == ("OLD WORDS", "NEW WORDS")
    assert asked == ["m1", "m1"]


def test_nothing_is_kept_once_the_document_is_gone() -> None:
    memo, _ = _counting()
    kept = doc("m1", text="a secret")
    memo(kept)
    memo(doc("m2", text="gone at once"))
    gc.collect()
    assert len(memo) == 1
    del kept
    gc.collect()
    assert len(memo) == 0
