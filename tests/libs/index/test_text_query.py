"""Pure tests of query building, checked against a real FTS5 table where it matters."""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogsub.index.text_query import (
    FTS5_BM25_K1,
    MAX_QUERY_TERMS,
    MAX_TERM_LENGTH,
    STOP_WORDS,
    fts5_idf,
    fts5_match,
    fts5_match_expression,
    fts5_stages,
    fts5_staging_pays,
    fts5_term_bound,
    fts5_weighty_terms,
    iter_words,
    join_terms,
    query_terms,
    quote_fts5,
    tokenize,
)
from tests.contract.index_contract import HOSTILE_QUERIES

_EXPRESSION = re.compile(r'"[^"]+"(?: OR "[^"]+")*')
_TOKENIZER = "tokenize = 'porter unicode61 remove_diacritics 2'"
# Every character, lone surrogates included: user text can hold anything.
_ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=200)


@pytest.fixture(scope="module")
def fts() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE docs USING fts5(summary, tags, {_TOKENIZER})")
    conn.executemany(
        "INSERT INTO docs (summary, tags) VALUES (?, ?)",
        [
            ("We deployed the billing service on Friday", "deploy billing"),
            ("Café naïve résumé", "unicode"),
            ("meet near the bridge and or not", "words"),
            ("東京 の 天気", "cjk"),
        ],
    )
    yield conn
    conn.close()


def matches(conn: sqlite3.Connection, expression: str) -> list[int]:
    rows = conn.execute(
        "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY rowid", (expression,)
    ).fetchall()
    return [rowid for (rowid,) in rows]


# --- tokenizing -------------------------------------------------------------------------------


def test_tokenize_splits_on_everything_but_letters_digits_and_marks() -> None:
    assert tokenize("Hello, World! It's 2026: v2.5-rc1") == [
        "hello",
        "world",
        "it",
        "s",
        "2026",
        "v2",
        "5",
        "rc1",
    ]


def test_tokenize_normalises_width_case_and_composition() -> None:
    assert tokenize("ＡＢＣ Straße CAFE\u0301") == ["abc", "strasse", "café"]


def test_tokenize_keeps_non_latin_words_whole() -> None:
    assert tokenize("हिन्दी 東京 Ελληνικά") == ["हिन्दी", "東京", "ελληνικά"]


def test_tokenize_drops_lone_marks_and_overlong_runs() -> None:
    assert tokenize("\u0301\u0302 ok " + "x" * (MAX_TERM_LENGTH + 1)) == ["ok"]
    assert tokenize("y" * MAX_TERM_LENGTH) == ["y" * MAX_TERM_LENGTH]


def test_tokenize_of_nothing_is_empty() -> None:
    for text in ("", "   ", "?!*()", "\x00\ud800"):
        assert tokenize(text) == []


def test_iter_words_is_lazy() -> None:
    words = iter_words("first second " + "? " * 1_000_000)
    assert next(words) == "first"


# --- query terms ------------------------------------------------------------------------------


def test_query_terms_drop_stop_words_and_duplicates_in_order() -> None:
    assert query_terms("How do I deploy the billing service? Deploy billing!") == [
        "deploy",
        "billing",
        "service",
    ]


def test_a_query_of_only_stop_words_keeps_them() -> None:
    assert query_terms("Who was it?") == ["who", "was", "it"]


def test_query_terms_are_capped() -> None:
    terms = query_terms(" ".join(f"w{i}" for i in range(MAX_QUERY_TERMS * 3)))
    assert terms == [f"w{i}" for i in range(MAX_QUERY_TERMS)]
    assert query_terms("a b c d", stop_words=frozenset(), max_terms=2) == ["a", "b"]


def test_stop_words_are_lower_case_words() -> None:
    assert STOP_WORDS
    assert all(word == word.casefold() and tokenize(word) == [word] for word in STOP_WORDS)
    assert {"the", "and", "is", "s", "t"} <= STOP_WORDS
    assert not {"deploy", "near", "billing"} & STOP_WORDS


def test_join_terms() -> None:
    assert join_terms(["deploy", "billing"]) == "deploy billing"


# --- FTS5 expressions -------------------------------------------------------------------------


def test_quote_fts5_doubles_quotes() -> None:
    assert quote_fts5('say "hi"') == '"say ""hi"""'
    assert quote_fts5("") == '""'


def test_fts5_match_ors_quoted_terms() -> None:
    assert fts5_match(["deploy", "billing"]) == '"deploy" OR "billing"'
    assert fts5_match([]) is None


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_hostile_queries_become_plain_terms(query: str, fts: sqlite3.Connection) -> None:
    expression = fts5_match_expression(query)
    if expression is None:
        assert query_terms(query) == []
        return
    assert _EXPRESSION.fullmatch(expression)
    matches(fts, expression)


def test_operator_words_match_as_words(fts: sqlite3.Connection) -> None:
    for query in ("NEAR(", "AND", "OR NOT", "near AND or"):
        expression = fts5_match_expression(query)
        assert expression is not None
        assert matches(fts, expression) == [3], query


def test_stemming_and_diacritics_still_apply_inside_quotes(fts: sqlite3.Connection) -> None:
    assert matches(fts, fts5_match_expression("deploying") or "") == [1]
    assert matches(fts, fts5_match_expression("cafe resume") or "") == [2]
    assert matches(fts, fts5_match_expression("東京") or "") == [4]


@settings(max_examples=300, deadline=None)
@given(_ANY_TEXT)
def test_any_text_gives_an_expression_that_sqlite_accepts(text: str) -> None:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE docs USING fts5(summary, tags, {_TOKENIZER})")
        conn.execute("INSERT INTO docs VALUES ('some text', 'tag')")
        expression = fts5_match_expression(text)
        if expression is None:
            assert query_terms(text) == []
        else:
            assert _EXPRESSION.fullmatch(expression)
            conn.execute("SELECT rowid FROM docs WHERE docs MATCH ?", (expression,)).fetchall()
    finally:
        conn.close()


_WORD = st.text(st.sampled_from("abcdefgh"), min_size=3, max_size=8)
_NOISE = st.text(st.sampled_from(" \t\"*:^()[]{}+-~!?.,;'\\/<>=&|#@%$"), max_size=6)


@settings(max_examples=200, deadline=None)
@given(word=_WORD, before=_NOISE, after=_NOISE)
def test_punctuation_around_a_word_never_changes_what_it_finds(
    word: str, before: str, after: str
) -> None:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE docs USING fts5(summary, tags, {_TOKENIZER})")
        conn.executemany("INSERT INTO docs VALUES (?, '')", [(f"zz {word} yy",), ("unrelated",)])
        expression = fts5_match_expression(f"{before}{word}{after}")
        assert expression is not None
        assert matches(conn, expression) == [1]
    finally:
        conn.close()


# --- bm25 pruning -----------------------------------------------------------------------------


def test_fts5_idf_is_what_bm25_uses() -> None:
    # Equal-length rows and one occurrence make bm25's term factor exactly 1, so score == idf.
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE docs USING fts5(summary)")
        rows = [("target w1 w2 w3",)] * 7 + [(f"x{i} y{i} z{i} q{i}",) for i in range(93)]
        conn.executemany("INSERT INTO docs VALUES (?)", rows)
        scores = conn.execute(
            "SELECT -bm25(docs) FROM docs WHERE docs MATCH '\"target\"'"
        ).fetchall()
        assert len(scores) == 7
        for (score,) in scores:
            assert score == pytest.approx(fts5_idf(7, 100), rel=1e-12)
    finally:
        conn.close()
    assert fts5_idf(90, 100) == 1e-6  # more than half the rows: floored, never negative


def test_fts5_term_bound_is_idf_times_k1_plus_one() -> None:
    assert fts5_term_bound(10, 1000) == pytest.approx(fts5_idf(10, 1000) * (FTS5_BM25_K1 + 1))


def test_fts5_stages_is_none_when_one_query_is_cheap_enough() -> None:
    assert fts5_stages(["a", "b"], [10, 20], 1000, budget=30) is None
    assert fts5_stages(["a", "b"], [5000, 0], 10_000, budget=100) is None  # one term matches


def test_fts5_stages_go_rarest_first_and_exclude_rarer_terms() -> None:
    stages = fts5_stages(["common", "rare", "mid", "absent"], [900, 3, 40, 0], 1000, budget=50)
    assert stages is not None
    assert [stage.expressions for stage in stages] == [
        ('("rare") AND ("mid" OR "common")', '("rare") NOT ("mid" OR "common")'),
        (
            '(("mid") NOT ("rare")) AND ("common")',
            '("mid") NOT ("rare" OR "common")',
        ),
        ('("common") NOT ("rare" OR "mid")',),
    ]
    bounds = [stage.rest_bound for stage in stages]
    common, mid = fts5_term_bound(900, 1000), fts5_term_bound(40, 1000)
    assert bounds == [pytest.approx(common + mid), pytest.approx(common), 0.0]


def test_weighty_terms_leave_out_terms_at_the_idf_floor_above_the_budget() -> None:
    terms, freqs = ["common", "rare", "half", "mid"], [900, 3, 500, 40]
    assert fts5_weighty_terms(terms, freqs, 1000, budget=100) == (["rare", "mid"], [3, 40])
    assert fts5_weighty_terms(terms, freqs, 1000, budget=5000) == (terms, freqs)  # cheap anyway
    everywhere = (["a", "b"], [700, 999])
    assert fts5_weighty_terms(*everywhere, 1000, budget=10) == everywhere  # nothing rarer left
    with pytest.raises(ValueError):
        fts5_weighty_terms(["a"], [1, 2], 10, budget=1)


@given(
    freqs=st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=6),
    budget=st.integers(min_value=0, max_value=3000),
)
def test_weighty_terms_keep_order_and_drop_only_floored_terms(
    freqs: list[int], budget: int
) -> None:
    terms = [f"t{i}" for i in range(len(freqs))]
    kept, kept_freqs = fts5_weighty_terms(terms, freqs, 1000, budget=budget)
    assert kept and kept == [t for t in terms if t in kept]  # a subsequence, never empty
    assert kept_freqs == [freqs[terms.index(t)] for t in kept]
    dropped = [freqs[terms.index(t)] for t in terms if t not in kept]
    assert all(fts5_idf(f, 1000) == 1e-6 for f in dropped)
    assert not dropped or sum(freqs) > budget


def test_staging_pays_only_when_the_rarest_term_is_much_rarer() -> None:
    assert fts5_staging_pays([3, 40, 900])
    assert fts5_staging_pays([80_426, 80_426, 188_541])
    assert not fts5_staging_pays([97_782, 163_207, 97_782])  # similar: the bound never cuts
    assert not fts5_staging_pays([5000, 0])  # one term left
    assert not fts5_staging_pays([])


def test_fts5_stages_check_their_arguments() -> None:
    with pytest.raises(ValueError):
        fts5_stages(["a", "b"], [1], 10, budget=1)


def test_stages_partition_the_full_match_on_a_real_table() -> None:
    rng = random.Random(3)
    vocabulary = [f"w{rank}" for rank in range(30)]
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE docs USING fts5(summary, tags, {_TOKENIZER})")
        rows = [
            (" ".join(rng.choices(vocabulary, k=6)), rng.choice(vocabulary)) for _ in range(300)
        ]
        conn.executemany("INSERT INTO docs VALUES (?, ?)", rows)
        for _ in range(30):
            terms = list(dict.fromkeys(rng.choices(vocabulary, k=4)))
            doc_freqs = [len(matches(conn, quote_fts5(term))) for term in terms]
            stages = fts5_stages(terms, doc_freqs, 300, budget=0)
            assert stages is not None
            reached = [
                rowid for stage in stages for e in stage.expressions for rowid in matches(conn, e)
            ]
            assert sorted(reached) == matches(conn, fts5_match(terms) or "")  # each row once
    finally:
        conn.close()


def test_staged_top_k_equals_the_full_query_on_a_real_table() -> None:
    rng = random.Random(11)
    vocabulary = [f"w{rank}" for rank in range(60)]
    weights = [1.0 / (rank + 1) for rank in range(60)]
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE docs USING fts5(summary, tags, {_TOKENIZER})")
        conn.executemany(
            "INSERT INTO docs VALUES (?, ?)",
            [
                (
                    " ".join(rng.choices(vocabulary, weights, k=rng.randint(3, 15))),
                    rng.choice(vocabulary),
                )
                for _ in range(2000)
            ],
        )
        sql = (
            "SELECT rowid, -bm25(docs, 1.0, 0.5) AS score FROM docs WHERE docs MATCH ?"
            " ORDER BY score DESC, rowid LIMIT 10"
        )

        def top(expression: str) -> list[tuple[int, float]]:
            return conn.execute(sql, (expression,)).fetchall()

        stopped_early = 0
        for _ in range(150):
            terms = list(dict.fromkeys(rng.choices(vocabulary, weights, k=rng.randint(2, 5))))
            doc_freqs = [len(matches(conn, quote_fts5(term))) for term in terms]
            stages = fts5_stages(terms, doc_freqs, 2000, budget=150)
            if stages is None:
                continue
            best: list[tuple[int, float]] = []
            used = 0
            for stage in stages:
                used += 1
                best = sorted(
                    best + [hit for e in stage.expressions for hit in top(e)],
                    key=lambda hit: (-hit[1], hit[0]),
                )[:10]
                if len(best) == 10 and best[-1][1] > stage.rest_bound:
                    break
            stopped_early += used < len(stages)
            full = top(fts5_match(terms) or "")
            assert [rowid for rowid, _ in best] == [rowid for rowid, _ in full], terms
            assert [score for _, score in best] == pytest.approx([s for _, s in full], rel=1e-9)
        assert stopped_early >= 20  # the bound must really have cut work short
    finally:
        conn.close()
