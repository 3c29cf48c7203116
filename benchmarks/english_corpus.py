"""Realistic English memories for the benchmarks, recombined from the LoCoMo dev turns.

A search engine's cost follows its text: how long the documents are, how words are spread
over them, how many documents a query's terms match. Syllable soup gets all three wrong, so
the recall and text-engine benchmarks draw their memories from real conversation instead:
the dev turns are cut into sentences and the sentences into clauses, and a seeded generator
joins whole sentences and clauses of different turns into documents of 15 to 60 words.
Every document reads as chat, the word frequencies stay those of the turns, and the same
seed gives the same corpus on any machine.

The dev split lives beside the repository, at ``../shared/datasets/locomo-dev/``, and is
never copied into it (its licence); :func:`require_locomo` says so when it is missing.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from cogsub.evaluation.locomo_data import load_locomo

LOCOMO_DEV = Path(__file__).resolve().parents[2] / "shared/datasets/locomo-dev/locomo-dev.json"
"""``../shared/datasets/locomo-dev/locomo-dev.json``, relative to the repository's root."""

MIN_WORDS = 15
MAX_WORDS = 60
#: Chance that a piece is a whole sentence rather than a clause of one.
WHOLE_SENTENCE = 0.6

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# Clause boundaries: punctuation, or a conjunction that starts a new clause.
_CLAUSE_CUT = re.compile(r"\s*[,;:]\s+|\s+(?=(?:and|but|so|because|when|while)\s)")
_LEADING_JOIN = re.compile(r"^(?:and|but|so|because|or)\s+", re.IGNORECASE)
_JOINS = (", and ", ", but ", ". ", ", so ", " because ", ". ")


class MissingDatasetError(FileNotFoundError):
    """The LoCoMo dev split is not where the benchmarks look for it."""


def require_locomo(path: Path = LOCOMO_DEV) -> Path:
    """``path`` if it is a file; else a :class:`MissingDatasetError` saying where it belongs."""
    if path.is_file():
        return path
    raise MissingDatasetError(
        f"the LoCoMo dev split is missing: expected {path} "
        "(../shared/datasets/locomo-dev/locomo-dev.json beside the repository; "
        "it is read from there and never copied into the repository)"
    )


@dataclass(frozen=True)
class Phrasebook:
    """The sentences and clauses documents are built from."""

    sentences: tuple[str, ...]
    clauses: tuple[str, ...]

    @classmethod
    def from_texts(cls, texts: Sequence[str]) -> Phrasebook:
        """Cut ``texts`` into sentences of at least three words, and those into clauses."""
        sentences = [
            sentence.strip()
            for text in texts
            for sentence in _SENTENCE_END.split(text)
            if len(sentence.split()) >= 3
        ]
        # A clause loses its own conjunction: documents join clauses with theirs.
        cut = (_LEADING_JOIN.sub("", c.strip()) for s in sentences for c in _CLAUSE_CUT.split(s))
        clauses = [clause.rstrip(".!?") for clause in cut if len(clause.split()) >= 3]
        if not sentences or not clauses:
            raise ValueError("the texts hold no sentence of three words or more")
        return cls(tuple(sentences), tuple(clauses))

    @property
    def vocabulary(self) -> int:
        """Distinct lower-case words over every sentence."""
        return len(
            {word.lower().strip(".,!?;:'\"()") for s in self.sentences for word in s.split()}
        )


def compose(book: Phrasebook, rng: random.Random) -> str:
    """One document: pieces of different turns joined until it holds 15 to 60 words."""
    target = rng.randint(MIN_WORDS, MAX_WORDS)
    words = 0
    parts: list[str] = []
    while words < target:
        if rng.random() < WHOLE_SENTENCE:
            piece = rng.choice(book.sentences).rstrip(".!?")
        else:
            piece = rng.choice(book.clauses)
        if parts:
            parts.append(rng.choice(_JOINS))
        parts.append(piece)
        words += len(piece.split())
    text = "".join(parts)
    kept = text.split()[:MAX_WORDS]
    return " ".join(kept).rstrip(",.;:!?") + "."


def documents(book: Phrasebook, count: int, *, seed: int) -> Iterator[str]:
    """``count`` documents, the same ones for the same ``seed``."""
    rng = random.Random(seed)
    for _ in range(count):
        yield compose(book, rng)


def locomo_phrasebook(path: Path = LOCOMO_DEV) -> Phrasebook:
    """The phrasebook of every dev turn's text (speaker names stay inside the turns' words)."""
    turns = [turn.text for c in load_locomo(require_locomo(path)) for turn in c.turns]
    return Phrasebook.from_texts(turns)


def locomo_questions(path: Path = LOCOMO_DEV) -> list[str]:
    """Every dev question (304, the adversarial ones too: each is a real query), in order."""
    return [q.question for c in load_locomo(require_locomo(path)) for q in c.questions]
