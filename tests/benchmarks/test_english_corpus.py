"""The benchmarks' English corpus: real phrases recombined, seeded, and of bounded length."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from benchmarks.english_corpus import (
    MAX_WORDS,
    MIN_WORDS,
    MissingDatasetError,
    Phrasebook,
    documents,
    require_locomo,
)

TURNS = [
    "We went camping with the kids last weekend, and the lake was freezing. Loved it!",
    "I started a pottery class because my therapist said it would help me relax.",
    "Caroline painted a sunrise over the hills; it hangs in her kitchen now.",
    "The adoption agency called on Tuesday, so we are preparing the spare room.",
]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z']+", text.lower()))


def test_documents_are_recombined_real_words_of_bounded_length() -> None:
    book = Phrasebook.from_texts(TURNS)
    source = _words(" ".join(TURNS)) | {"and", "but", "so", "because"}
    made = list(documents(book, 200, seed=3))
    assert all(MIN_WORDS <= len(text.split()) <= MAX_WORDS for text in made)
    assert all(_words(text) <= source for text in made)
    # Pieces of different turns meet in one document: recombined, not turns repeated.
    assert any("camping" in text and "pottery" in text for text in made)


def test_the_same_seed_gives_the_same_corpus_and_another_seed_another() -> None:
    book = Phrasebook.from_texts(TURNS)
    assert list(documents(book, 50, seed=7)) == list(documents(book, 50, seed=7))
    assert list(documents(book, 50, seed=7)) != list(documents(book, 50, seed=8))


def test_clauses_lose_their_own_conjunction() -> None:
    book = Phrasebook.from_texts(TURNS)
    assert "the lake was freezing" in book.clauses
    assert not any(c.lower().startswith(("and ", "but ", "so ")) for c in book.clauses)


def test_text_without_a_sentence_is_refused() -> None:
    with pytest.raises(ValueError, match="no sentence"):
        Phrasebook.from_texts(["ok", "hi there"])


def test_a_missing_dev_split_is_named_with_its_repository_relative_place(tmp_path: Path) -> None:
    with pytest.raises(MissingDatasetError, match=r"\.\./shared/datasets/locomo-dev/"):
        require_locomo(tmp_path / "absent.json")
