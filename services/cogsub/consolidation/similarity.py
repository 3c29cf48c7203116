"""How alike two memories are, with or without meaningful vectors (pure).

The hash embedder's vectors carry no meaning, so consolidation never relies on
cosine alone: the lexical overlap of content words always counts, and cosine
joins in only when the embedder is semantic (MiniLM, OpenAI).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
_STOP_WORDS = """a an the and or but if then so to of in on at by for with from into onto about
    as is are was were be been being am do does did done have has had i me my mine we us our
    you your he him
    his she her it its they them their this that these those there here not no nope yes please
    just really very also too can could should would will shall may might must let lets it's i'm
    i've don't dont actually instead always never every any some all more most than what
    which who whom when where why how"""
_STOP = frozenset(_STOP_WORDS.split())
_SUFFIXES = ("ing", "ed", "es", "s")


def stem(word: str) -> str:
    """A crude, stable stem: enough to match "deploys" with "deploying" (not linguistics)."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> frozenset[str]:
    """Stemmed words of ``text`` that carry meaning (stop words dropped)."""
    words = _WORD.findall(text.lower().replace("’", "'"))
    return frozenset(stem(w) for w in words if w not in _STOP and not w.endswith("'t"))


def dice(a: frozenset[str], b: frozenset[str]) -> float:
    """Dice overlap of two word sets, in [0, 1] (0 when either is empty)."""
    if not a or not b:
        return 0.0
    return 2 * len(a & b) / (len(a) + len(b))


def containment(part: frozenset[str], whole: frozenset[str]) -> float:
    """Share of ``part``'s words found in ``whole``, in [0, 1]."""
    return len(part & whole) / len(part) if part else 0.0


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity (0 for a zero vector or mismatched lengths)."""
    if len(a) != len(b) or not a:
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def similarity(
    a_words: frozenset[str],
    b_words: frozenset[str],
    a_vector: Sequence[float] = (),
    b_vector: Sequence[float] = (),
    *,
    semantic: bool = False,
) -> float:
    """The larger of lexical overlap and (for a semantic embedder) cosine."""
    lexical = dice(a_words, b_words)
    if not semantic:
        return lexical
    return max(lexical, cosine(a_vector, b_vector))
