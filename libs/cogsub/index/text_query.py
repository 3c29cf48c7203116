"""Turn arbitrary user text into safe full-text queries (pure functions, no I/O).

Query text comes from agents and end users, so it is never handed to a search
engine's query parser as is: FTS5 and OpenSearch's ``query_string`` both give
meaning to quotes, ``*``, ``:``, ``NEAR(``, ``AND``/``OR``/``NOT`` and
parentheses. Instead the text is cut into words (runs of Unicode letters,
digits and combining marks, after NFKC normalisation), case-folded, deduplicated
and capped; every word is then a plain term. Operators and punctuation simply
disappear, and operator words (``AND``, ``NEAR``) become ordinary terms.

English stop words are dropped from queries because they match most documents
(slow, and they add little to BM25), unless the query has nothing else
("who was it?" still searches for its words). The OpenSearch adapter and the
recall pipeline reuse :func:`tokenize`, :func:`query_terms` and
:data:`STOP_WORDS` so that every backend sees the same terms.

The last part plans exact top-k evaluation of FTS5's bm25() in stages
(:func:`fts5_stages`), which the SQLite adapter uses for queries of common words.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

MAX_QUERY_TERMS = 32
"""Terms kept from one query; longer queries only cost time without changing the top hits much."""

MAX_TERM_LENGTH = 64
"""Longer runs of letters are noise (base64, hashes pasted twice) and are dropped."""

_STOP_WORDS_TEXT = """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can cannot could did do does doing done down
    during each either else ever every few for from further get gets got had has have
    having he her here hers herself him himself his how however i if in into is it its
    itself just let me might mine more most much must my myself neither no nor not now
    of off on once only or other others otherwise our ours ourselves out over own per
    quite rather same shall she should so some such than that the their theirs them
    themselves then there these they this those though through thus to too under until
    up upon us very was we were what whatever when whenever where whereas wherever
    whether which while who whoever whom whose why will with within without would yet
    you your yours yourself yourselves
    d ll m re s t ve don doesn didn isn wasn aren weren won wouldn couldn shouldn
"""
STOP_WORDS: frozenset[str] = frozenset(_STOP_WORDS_TEXT.split())
"""Lower-case English function words, including the pieces contractions split into."""

_WORD_CATEGORIES = ("L", "N", "M")


def _is_word_char(char: str) -> bool:
    return unicodedata.category(char)[0] in _WORD_CATEGORIES


def _has_letter_or_digit(word: str) -> bool:
    # A run of combining marks alone tokenizes to nothing in FTS5; it is not a word.
    return any(unicodedata.category(char)[0] in "LN" for char in word)


def iter_words(text: str) -> Iterator[str]:
    """Yield the case-folded words of ``text`` in order, duplicates included.

    Args:
        text: Any string, including control characters and lone surrogates.

    Yields:
        Runs of letters, digits and combining marks (NFKC-normalised and
        case-folded) of at most :data:`MAX_TERM_LENGTH` characters.
    """
    normalised = unicodedata.normalize("NFKC", text)
    start = -1
    for position, char in enumerate(normalised):
        if _is_word_char(char):
            if start < 0:
                start = position
            continue
        if start >= 0:
            word = _accept(normalised[start:position])
            if word is not None:
                yield word
            start = -1
    if start >= 0:
        word = _accept(normalised[start:])
        if word is not None:
            yield word


def _accept(run: str) -> str | None:
    if len(run) > MAX_TERM_LENGTH or not _has_letter_or_digit(run):
        return None
    return run.casefold()


def tokenize(text: str) -> list[str]:
    """All words of ``text`` (see :func:`iter_words`), duplicates and stop words included."""
    return list(iter_words(text))


def query_terms(
    text: str,
    *,
    stop_words: frozenset[str] = STOP_WORDS,
    max_terms: int = MAX_QUERY_TERMS,
) -> list[str]:
    """The distinct search terms of a query, in first-seen order.

    Stop words are removed unless only stop words are left, in which case they
    are the query. At most ``max_terms`` terms are kept.

    Args:
        text: Arbitrary query text from a user or agent.
        stop_words: Words to drop when the query has other words.
        max_terms: Cap on the number of terms returned.

    Returns:
        Possibly empty list of case-folded terms.
    """
    content: list[str] = []
    fallback: list[str] = []
    seen: set[str] = set()
    for word in iter_words(text):
        if word in seen:
            continue
        seen.add(word)
        if word in stop_words:
            if len(fallback) < max_terms:
                fallback.append(word)
            continue
        content.append(word)
        if len(content) >= max_terms:
            break
    return content or fallback


def quote_fts5(term: str) -> str:
    """``term`` as an FTS5 string literal (a phrase), whatever characters it holds."""
    return '"' + term.replace('"', '""') + '"'


def fts5_match(terms: Iterable[str]) -> str | None:
    """An FTS5 MATCH expression that ORs the quoted ``terms``, or ``None`` when empty.

    Each term is quoted, so FTS5 never reads it as an operator, a column filter
    or a prefix query; the engine's tokenizer (porter stemming included) still
    applies inside the quotes.
    """
    quoted = [quote_fts5(term) for term in terms]
    return " OR ".join(quoted) if quoted else None


def fts5_match_expression(text: str) -> str | None:
    """The FTS5 MATCH expression for arbitrary query text, or ``None`` (no terms: no hits)."""
    return fts5_match(query_terms(text))


def join_terms(terms: Sequence[str]) -> str:
    """Terms as one space-separated string, for engines that analyse text themselves."""
    return " ".join(terms)


# --- Top-k in stages for FTS5's bm25() ------------------------------------------------------
#
# bm25() costs about a microsecond per matching row, so an OR of common words over
# 100k rows is slow although rows holding only common words rarely reach the top.
# FTS5 sums one term per phrase of the expression (idf * f(tf), each f < k1 + 1),
# and phrases a row lacks add nothing, so any expression naming every query term
# scores a row exactly as the full OR does. Stage i takes the rows that hold term
# i (terms sorted rarest first) and none of the rarer ones, so the stages
# partition the full match and each row is scored once. Rows not reached yet
# hold only the remaining terms and score below ``rest_bound``: once the k-th
# best row so far beats it, the top k is the full query's (the MaxScore idea).

FTS5_BM25_K1 = 1.2
"""The k1 constant compiled into FTS5's bm25()."""

_BOUND_MARGIN = 1.0 + 1e-9  # our idf and FTS5's may differ in the last bits


def fts5_idf(doc_freq: int, total_docs: int) -> float:
    """The IDF that FTS5's bm25() gives a phrase found in ``doc_freq`` of ``total_docs`` rows."""
    idf = math.log((total_docs - doc_freq + 0.5) / (doc_freq + 0.5))
    return idf if idf > 0.0 else 1e-6


def fts5_term_bound(doc_freq: int, total_docs: int) -> float:
    """The most one phrase adds to any row's bm25() score, whatever the column weights."""
    return fts5_idf(doc_freq, total_docs) * (FTS5_BM25_K1 + 1.0)


def fts5_weighty_terms(
    terms: Sequence[str], doc_freqs: Sequence[int], total_docs: int, *, budget: int
) -> tuple[list[str], list[int]]:
    """The terms worth matching and their frequencies, in query order.

    bm25() floors the IDF of a phrase found in half the rows or more at 1e-6
    (:func:`fts5_idf`): such a term adds at most ~2e-6 to any row's score, yet
    every row holding it has to be found, filtered and scored. When the terms
    match more than ``budget`` rows in all, those terms are left out as long as
    a rarer one remains; the rows only they matched would have ranked last, at
    scores of ~1e-6. Under the budget, or when every term is that common, the
    query is kept whole.
    """
    if len(terms) != len(doc_freqs):
        raise ValueError("terms and doc_freqs must have the same length")
    pairs = list(zip(terms, doc_freqs, strict=True))
    weighty = [(term, freq) for term, freq in pairs if fts5_idf(freq, total_docs) > 1e-6]
    if sum(doc_freqs) <= budget or not weighty or len(weighty) == len(pairs):
        return list(terms), list(doc_freqs)
    return [term for term, _ in weighty], [freq for _, freq in weighty]


FTS5_STAGING_SPREAD = 2
"""How many times rarer than the commonest term the rarest must be for staging to pay."""


def fts5_staging_pays(doc_freqs: Sequence[int]) -> bool:
    """Whether answering in stages (:func:`fts5_stages`) can cut the work short.

    Stages are exact whatever the frequencies; they only pay when the rows
    holding a rare term can outscore everything the commoner terms could add.
    With terms of similar frequency that bound is never met: on 487k documents
    whose query terms each match ~20 % of them, the stages cost 113–256 ms a
    query against 119–179 ms for one query (five queries), with the same results.
    """
    present = [freq for freq in doc_freqs if freq]
    return len(present) > 1 and max(present) >= FTS5_STAGING_SPREAD * min(present)


@dataclass(frozen=True)
class Fts5Stage:
    """MATCH expressions for the rows first reached at one stage, and what later rows can score.

    Attributes:
        expressions: Disjoint queries that together match the rows holding this
            stage's term and no rarer one; each names every query term.
        rest_bound: Rows of later stages score strictly below this (0 at the last stage).
    """

    expressions: tuple[str, ...]
    rest_bound: float


def fts5_stages(
    terms: Sequence[str], doc_freqs: Sequence[int], total_docs: int, *, budget: int
) -> list[Fts5Stage] | None:
    """Stages for the OR of ``terms``, or ``None`` when one full query is cheap enough.

    Args:
        terms: Distinct query terms, as from :func:`query_terms`.
        doc_freqs: Rows matching each term alone (``doc_freqs[i]`` for ``terms[i]``).
        total_docs: Rows in the FTS table (bm25's N).
        budget: Matching rows up to which staging is not worth its extra queries.

    Returns:
        One stage per term that some row holds, rarest first; ``None`` if the
        terms match at most ``budget`` rows in all, or fewer than two terms match.
    """
    if len(terms) != len(doc_freqs):
        raise ValueError("terms and doc_freqs must have the same length")
    # A term no row holds adds nothing to any score: leave it out entirely.
    present = sorted((freq, term) for freq, term in zip(doc_freqs, terms, strict=True) if freq)
    if len(present) < 2 or sum(freq for freq, _ in present) <= budget:
        return None
    stages = []
    for position, (_, term) in enumerate(present):
        quoted = quote_fts5(term)
        rarer = fts5_match(other for _, other in present[:position])
        rest = fts5_match(other for _, other in present[position + 1 :])
        own = f"({quoted}) NOT ({rarer})" if rarer else quoted
        if rest is None:
            stages.append(Fts5Stage((own,), 0.0))
            break
        excluded = f"{rarer} OR {rest}" if rarer else rest
        bound = sum(fts5_term_bound(freq, total_docs) for freq, _ in present[position + 1 :])
        stages.append(
            Fts5Stage(
                (f"({own}) AND ({rest})", f"({quoted}) NOT ({excluded})"), bound * _BOUND_MARGIN
            )
        )
    return stages
