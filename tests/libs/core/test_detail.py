"""The text past the summary that the index searches: ``detail_of`` and the index document."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cogsub.core import (
    DETAIL_LENGTH,
    SUMMARY_LENGTH,
    detail_of,
    index_document_for,
    indexed_text,
    validate_event,
)
from cogsub.core.events import MAX_TEXT_LENGTH
from tests.libs.core.test_events import with_change


def test_a_text_the_summary_holds_whole_has_no_detail() -> None:
    assert detail_of("") == ""
    assert detail_of("x" * SUMMARY_LENGTH) == ""


def test_the_word_the_summary_cuts_is_in_the_detail_whole() -> None:
    text = "a" * (SUMMARY_LENGTH - 4) + " kubelet restarts"
    assert text[:SUMMARY_LENGTH].endswith(" kub")
    assert detail_of(text) == "kubelet restarts"


def test_a_cut_between_words_starts_the_detail_at_the_next_word() -> None:
    text = "a" * (SUMMARY_LENGTH - 1) + " then restart"
    assert detail_of(text) == "then restart"


def test_the_detail_ends_at_the_last_whole_word_within_its_bound() -> None:
    head = "h" * (SUMMARY_LENGTH - 1) + " "
    words = ["w" * 9] * (DETAIL_LENGTH // 10 + 5)
    detail = detail_of(head + " ".join(words))
    assert len(detail) <= DETAIL_LENGTH
    assert set(detail.split(" ")) == {"w" * 9}
    assert len(detail) > DETAIL_LENGTH - 10


def test_a_text_without_spaces_is_cut_where_the_bounds_fall() -> None:
    text = "z" * (SUMMARY_LENGTH + DETAIL_LENGTH + 50)
    assert detail_of(text) == "z" * DETAIL_LENGTH


#: Texts of short words around the summary's cut: a first word of any length moves the cut.
long_texts = st.builds(
    lambda first, words, separator: separator.join(["a" * first, *words]),
    st.integers(1, SUMMARY_LENGTH + 20),
    st.lists(st.text(alphabet="ab", min_size=1, max_size=9), min_size=30, max_size=400),
    st.sampled_from([" ", "\n", "  "]),
)


@given(long_texts)
def test_the_detail_is_part_of_the_text_past_the_summary_s_first_word(text: str) -> None:
    detail = detail_of(text)
    assert len(detail) <= DETAIL_LENGTH
    assert detail == detail.strip()
    if len(text) <= SUMMARY_LENGTH:
        assert detail == ""
    elif detail:
        assert detail in text[: SUMMARY_LENGTH + DETAIL_LENGTH + 1]
        assert text.rfind(detail) + len(detail) > SUMMARY_LENGTH


def test_the_index_document_carries_the_detail_and_the_summary_stays_the_seed_s() -> None:
    text = "Deploy notes. " * 20 + "Finally restart the kubelet."
    assert len(text) > SUMMARY_LENGTH and len(text) < MAX_TEXT_LENGTH
    event = validate_event(with_change("input.text", text))
    doc = index_document_for(event, embedding=[0.0], importance_score=0.5, object_storage_key="k")
    assert doc.summary == text[:SUMMARY_LENGTH]
    assert doc.detail == detail_of(text)
    assert doc.detail.endswith("restart the kubelet.")


def test_the_stored_body_is_the_seed_s_shape_unless_there_is_a_detail() -> None:
    event = validate_event(with_change("input.text", "short"))
    doc = index_document_for(event, embedding=[0.0], importance_score=0.5, object_storage_key="k")
    assert "detail" not in doc.to_source()
    longer = doc.model_copy(update={"detail": "the rest"})
    assert longer.to_source()["detail"] == "the rest"


@given(long_texts, st.booleans())
def test_the_indexed_text_is_the_text_s_words_up_to_the_detail_s_end(
    text: str, one_word: bool
) -> None:
    if one_word:
        text = "".join(text.split())
    event = validate_event(with_change("input.text", text))
    doc = index_document_for(event, embedding=[0.0], importance_score=0.5, object_storage_key="k")
    indexed, words = indexed_text(doc).split(), text.split()
    if len(text) <= SUMMARY_LENGTH:
        assert indexed_text(doc) == text
    else:
        assert len(indexed_text(doc)) > SUMMARY_LENGTH
        assert indexed[:-1] == words[: len(indexed) - 1]
        assert words[len(indexed) - 1].startswith(indexed[-1])  # cut at a bound mid-word


def test_a_summary_of_one_word_is_held_whole_by_the_detail() -> None:
    text = "a" * SUMMARY_LENGTH + " then more"
    event = validate_event(with_change("input.text", text))
    doc = index_document_for(event, embedding=[0.0], importance_score=0.5, object_storage_key="k")
    assert doc.detail == text
    assert indexed_text(doc) == text
