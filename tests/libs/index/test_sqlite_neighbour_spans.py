"""The SQLite window read by spans gives what one LIMIT query per anchor and side gave.

The oracle is the statement the span read replaced, kept here as it was: for random
banks (sessions, tied timestamps, rows out of reach, filters that matter, skip sets),
both must name the same rows in the same order, by the span read and by its fallback.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cogsub.core import FactType, IndexDocument
from cogsub.index.ports import SearchFilters
from cogsub.index.sqlite import SqliteMemoryIndex, reads
from cogsub.index.sqlite.columns import timestamp_us
from cogsub.index.sqlite.window import Anchor, spans
from tests.contract.index_contract import BASE_TIME, make_doc

DIMENSION = 4
SEEDS = 40
ASKS_PER_SEED = 12

_SIDE = (
    "SELECT anchor.n, {side}, near.ts_us, near.event_id, near.doc_id FROM anchor"
    " JOIN documents AS near ON near.doc_id IN ("
    " SELECT d.doc_id FROM documents AS d WHERE {{where}}"
    " AND json_extract(d.body, '$.session_id') = anchor.session_id"
    " AND (d.ts_us, d.event_id) {compare} (anchor.at_us, anchor.event_id)"
    " AND d.ts_us {bound} anchor.at_us {sign} ?"
    " ORDER BY d.ts_us {order}, d.event_id {order} LIMIT ?)"
)
ORACLE = (
    "WITH anchor (n, session_id, at_us, event_id) AS (SELECT json_extract(value, '$[0]'),"
    " json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]')"
    " FROM json_each(?)) "
    + _SIDE.format(side=0, compare="<", bound=">=", sign="-", order="DESC")
    + " UNION ALL "
    + _SIDE.format(side=1, compare=">", bound="<=", sign="+", order="ASC")
)


def oracle_doc_ids(
    conn: sqlite3.Connection,
    filters: SearchFilters,
    anchors: list[IndexDocument],
    each_side: int,
    window_us: int | None,
    skip: set[str],
) -> list[int]:
    """The window as the per-anchor statement read it, and as its caller ordered it."""
    where, params = reads.filter_sql(filters)
    reach = 2**62 if window_us is None else window_us
    placed = [
        [n, a.session_id, timestamp_us(a.timestamp), a.event_id] for n, a in enumerate(anchors)
    ]
    rows = conn.execute(
        ORACLE.format(where=where),
        (json.dumps(placed), *params, reach, each_side, *params, reach, each_side),
    ).fetchall()
    sides: dict[tuple[int, int], list[tuple[Any, ...]]] = {}
    for n, side, *row in rows:
        sides.setdefault((n, side), []).append(tuple(row))
    wanted: dict[str, int] = {}
    for (_, side), found in sorted(sides.items(), key=lambda item: item[0]):
        found.sort(key=lambda row: (row[0], row[1]), reverse=side == 0)
        for _, event_id, doc_id in found:
            if event_id not in skip and event_id not in wanted:
                wanted[event_id] = doc_id
    return list(wanted.values())


async def written(path: Path, docs: list[IndexDocument]) -> Path:
    """An index file at ``path`` holding ``docs``, closed."""
    index = SqliteMemoryIndex(path)
    await index.ensure(dimension=DIMENSION)
    await index.upsert(docs)  # one write: a sync per bank was most of this suite's time
    await index.close()
    return path


@pytest.fixture
async def index_file(data_dir: Path) -> AsyncIterator[Path]:
    docs = [d for seed in range(SEEDS) for d in random_bank(random.Random(seed), f"b{seed}")]
    yield await written(data_dir / "index.sqlite3", docs)


@pytest.fixture
def conn(index_file: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(index_file, isolation_level=None)
    yield conn
    conn.close()


TAGS = ["red", "green", "blue"]
FACTS = [None, FactType.WORLD, FactType.EXPERIENCE]


def random_bank(rng: random.Random, bank: str) -> list[IndexDocument]:
    """Three sessions and some loose rows; timestamps on a coarse grid, so many tie."""
    docs = []
    for n in range(rng.randrange(20, 70)):
        session = rng.choice([f"{bank}-s0", f"{bank}-s1", f"{bank}-s2", None])
        docs.append(
            make_doc(
                bank,
                f"e{rng.randrange(1000):03d}-{n}",
                dimension=DIMENSION,
                timestamp=BASE_TIME + timedelta(seconds=rng.randrange(0, 40) * 5),
                importance=rng.choice([0.2, 0.5, 0.8]),
                tags=rng.sample(TAGS, rng.randrange(0, 3)),
                fact_type=rng.choice(FACTS),
                session_id=session,
            )
        )
    return docs


def random_anchors(rng: random.Random, bank: str, docs: list[IndexDocument]) -> list[IndexDocument]:
    """Rows of the bank, and documents that are not: elsewhere in time, or sessionless."""
    anchors = rng.sample(docs, rng.randrange(1, 8))
    for n in range(rng.randrange(0, 3)):
        anchors.append(
            make_doc(
                bank,
                f"x{n}",
                dimension=DIMENSION,
                timestamp=BASE_TIME + timedelta(seconds=rng.randrange(-20, 220)),
                session_id=rng.choice([f"{bank}-s0", f"{bank}-s2", f"{bank}-s9", None]),
            )
        )
    rng.shuffle(anchors)
    return [a for a in anchors if a.session_id is not None]


def random_filters(rng: random.Random, bank: str) -> SearchFilters:
    return SearchFilters(
        bank_id=bank,
        fact_types=rng.choice(
            [None, frozenset({FactType.WORLD}), frozenset(FactType) - {FactType.WORLD}]
        ),
        tags_any=rng.choice([None, None, frozenset({"red"}), frozenset({"green", "blue"})]),
        since=rng.choice([None, None, BASE_TIME + timedelta(seconds=30)]),
        until=rng.choice([None, None, BASE_TIME + timedelta(seconds=170)]),
        min_importance=rng.choice([None, None, 0.5]),
    )


def asks(conn: sqlite3.Connection) -> Iterator[tuple[Any, ...]]:
    """(filters, anchors, each_side, window_us, skip) for every seed's bank."""
    for seed in range(SEEDS):
        rng = random.Random(seed)
        bank = f"b{seed}"
        docs = random_bank(rng, bank)
        for _ in range(ASKS_PER_SEED):
            anchors = random_anchors(rng, bank, docs)
            filters = random_filters(rng, bank)
            each_side = rng.randrange(0, 5)
            window_us = rng.choice([None, 0, 5_000_000, 12_000_000, 60_000_000])
            skip = {d.event_id for d in rng.sample(docs, rng.randrange(0, 10))}
            yield filters, anchors, each_side, window_us, skip


def test_span_read_names_the_rows_the_per_anchor_statement_named(
    conn: sqlite3.Connection,
) -> None:
    compared = nonempty = 0
    for ask in asks(conn):
        expected = oracle_doc_ids(conn, *ask)
        assert reads.neighbour_doc_ids(conn, *ask) == expected, ask
        compared += 1
        nonempty += bool(expected)
    assert compared == SEEDS * ASKS_PER_SEED
    assert nonempty > compared // 3  # the comparison must be about rows, not empty lists


def test_neighbour_rows_are_those_rows_with_their_bodies(conn: sqlite3.Connection) -> None:
    for ask in asks(conn):
        expected = oracle_doc_ids(conn, *ask)
        stored = {
            doc_id: (event_id, body, blob)
            for doc_id, event_id, body, blob in conn.execute(
                "SELECT doc_id, event_id, body, embedding FROM documents"
                " WHERE doc_id IN (SELECT value FROM json_each(?))",
                (json.dumps(expected),),
            )
        }
        assert reads.neighbour_rows(conn, *ask) == [stored[d] for d in expected], ask
        assert not conn.in_transaction


def test_spans_over_the_row_cap_fall_back_to_the_same_rows(
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reads, "_SPAN_ROWS_PER_TURN", 0)  # any row is too many
    monkeypatch.setattr(reads, "_SPAN_ROWS_ANYWAY", 0)
    counted = counting(monkeypatch)
    for ask in asks(conn):
        expected = oracle_doc_ids(conn, *ask)
        assert reads.neighbour_doc_ids(conn, *ask) == expected, ask
    assert sum(len(dense) for dense in counted) > SEEDS  # so the fallback was compared too


def counting(monkeypatch: pytest.MonkeyPatch) -> list[set[int]]:
    """The dense spans of each read that stopped and counted its spans' rows instead."""
    counted: list[set[int]] = []
    real = reads._counted_spans

    def counted_spans(*args: Any) -> tuple[list[Any], set[int]]:
        found = real(*args)
        counted.append(found[1])
        return found

    monkeypatch.setattr(reads, "_counted_spans", counted_spans)
    return counted


async def test_a_dense_session_is_asked_per_anchor_with_the_same_turns(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = data_dir / "dense.sqlite3"
    index = SqliteMemoryIndex(path)
    await index.ensure(dimension=DIMENSION)
    turns = [
        make_doc(
            "dense", f"t{n:03d}", dimension=DIMENSION, timestamp=BASE_TIME + timedelta(seconds=n)
        )
        for n in range(120)
    ]
    await index.upsert(turns)
    await index.close()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        ask = (SearchFilters(bank_id="dense"), [turns[60]], 2, None, set[str]())
        counted = counting(monkeypatch)
        by_id = {d: e for d, e in conn.execute("SELECT doc_id, event_id FROM documents")}
        found = [by_id[d] for d in reads.neighbour_doc_ids(conn, *ask)]
        assert counted == [{0}]  # the whole session is 120 rows, not 12: asked per anchor
        assert found == ["dense-t059", "dense-t058", "dense-t061", "dense-t062"]
        assert reads.neighbour_doc_ids(conn, *ask) == oracle_doc_ids(conn, *ask)
    finally:
        conn.close()


def mixed_bank(rng: random.Random, bank: str) -> list[IndexDocument]:
    """Dense sessions (a turn a second, tens of them) beside sparse ones (a few turns)."""
    docs = []
    for s in range(rng.randrange(2, 5)):
        dense = rng.random() < 0.5
        count = rng.randrange(130, 260) if dense else rng.randrange(1, 6)
        gap = 1 if dense else 10
        docs += [
            make_doc(
                bank,
                f"s{s}-{n:03d}",
                dimension=DIMENSION,
                timestamp=BASE_TIME + timedelta(seconds=gap * n + rng.randrange(0, 2)),
                tags=rng.sample(TAGS, rng.randrange(0, 2)),
                session_id=f"{bank}-s{s}",
            )
            for n in range(count)
        ]
    return docs


MIXED = 20


def span_count(anchors: list[IndexDocument], window_us: int | None) -> int:
    placed = [Anchor(str(a.session_id), timestamp_us(a.timestamp), a.event_id) for a in anchors]
    return len(spans(placed, 2**62 if window_us is None else window_us)[0])


@pytest.fixture
async def mixed_file(data_dir: Path) -> AsyncIterator[Path]:
    docs = [d for seed in range(MIXED) for d in mixed_bank(random.Random(seed), f"m{seed}")]
    yield await written(data_dir / "mixed.sqlite3", docs)


def test_dense_and_sparse_spans_of_one_call_give_the_per_anchor_rows(
    mixed_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = sqlite3.connect(mixed_file, isolation_level=None)
    counted = counting(monkeypatch)
    mixed = 0
    try:
        for seed in range(MIXED):
            rng = random.Random(seed)
            bank = f"m{seed}"
            docs = mixed_bank(rng, bank)
            for _ in range(6):
                # Some anchors anywhere (mostly in dense sessions), one in each of some sessions.
                anchors = rng.sample(docs, rng.randrange(1, 8))
                by_session = {d.session_id: d for d in rng.sample(docs, len(docs))}
                anchors += [d for d in by_session.values() if rng.random() < 0.6]
                filters = SearchFilters(
                    bank_id=bank, tags_any=rng.choice([None, None, frozenset({"red"})])
                )
                window_us = rng.choice([None, 3_000_000, 30_000_000, 120_000_000])
                skip = {d.event_id for d in rng.sample(docs, min(len(docs), rng.randrange(4)))}
                ask = (filters, anchors, rng.randrange(1, 4), window_us, skip)
                before = len(counted)
                assert reads.neighbour_doc_ids(conn, *ask) == oracle_doc_ids(conn, *ask), ask
                many = span_count(anchors, window_us)
                mixed += len(counted) > before and 0 < len(counted[-1]) < many
    finally:
        conn.close()
    assert mixed > 10  # calls where some spans were read and others asked per anchor


def test_every_span_dense_is_asked_per_anchor_with_the_same_rows(
    mixed_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reads, "_SPAN_ROWS_PER_TURN", 0)  # any row is too many
    monkeypatch.setattr(reads, "_SPAN_ROWS_ANYWAY", 0)
    conn = sqlite3.connect(mixed_file, isolation_level=None)
    counted = counting(monkeypatch)
    found = 0
    try:
        for seed in range(MIXED):
            docs = mixed_bank(random.Random(seed), f"m{seed}")
            ask = (SearchFilters(bank_id=f"m{seed}"), docs[::5], 2, None, set[str]())
            expected = oracle_doc_ids(conn, *ask)
            assert reads.neighbour_doc_ids(conn, *ask) == expected, seed
            # Each anchor's session is one span (no window) and none of them was read.
            assert counted[-1] == set(range(len({d.session_id for d in docs[::5]}))), seed
            found += len(expected)
    finally:
        conn.close()
    assert len(counted) == MIXED
    assert found > 10 * MIXED
