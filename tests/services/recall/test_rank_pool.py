"""Ranking on fusion's columns (``rank_pool``) orders and scores exactly as the reference does.

The reference is the formula written out one candidate at a time: :func:`score` for each,
then a sort by (final, fused, id) descending. Ties are drawn from a few values on purpose.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from cogsub.core import FactType
from cogsub.recall.context import neighbour_links
from cogsub.recall.fusion import Candidate, Pool, contextual_fuse, contextual_pool
from cogsub.recall.policy import RankingPolicy
from cogsub.recall.query import analyse_query
from cogsub.recall.ranking import (
    Scored,
    _recency_column,
    is_current_version,
    rank,
    rank_pool,
    recency,
    score,
)
from tests.services.recall.docs import doc, hits

NOW = datetime(2023, 6, 7, 13, 56, tzinfo=UTC)

#: Few distinct values, so equal finals and equal relevances are common.
_ROW = st.tuples(
    st.sampled_from([0.0, 0.25, 0.5, 1.0, 1 / 3]),  # fused relevance
    st.sampled_from([0.0, 0.5, 0.8]),  # importance
    st.sampled_from([0, 1, 7]),  # retrieval count
    st.sampled_from([0.0, -86_400.0, 3_600.0, -40 * 86_400.0]),  # seconds from T0
    st.sampled_from([FactType.WORLD, FactType.OBSERVATION]),
    st.one_of(st.none(), st.integers(0, 3)),  # novelty age
    st.sampled_from([None, "s1", "s2"]),  # session
)


def _reference(
    candidates: list[Candidate], policy: RankingPolicy, ages: dict[str, int], prefer: bool
) -> list[Scored]:
    one_by_one = [
        score(
            c,
            policy,
            now=NOW,
            novelty_age=ages.get(c.document.event_id),
            prefer_observations=prefer,
        )
        for c in candidates
    ]
    return sorted(
        one_by_one, key=lambda s: (-s.final, -s.candidate.fused, s.candidate.document.event_id)
    )


def _candidates(rows: list[tuple], ids: list[str]) -> tuple[list[Candidate], dict[str, int]]:
    candidates, ages = [], {}
    for event_id, (fused, importance, count, at, fact_type, age, session) in zip(
        ids, rows, strict=False
    ):
        document = doc(
            event_id, importance=importance, retrieval_count=count, at=at, session=session
        )
        document.fact_type = fact_type
        candidates.append(Candidate(document, fused=fused, bm25_rank=1, cosine=0.5))
        if age is not None:
            ages[event_id] = age
    return candidates, ages


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_ROW, max_size=30),
    st.permutations([f"m{n:02d}" for n in range(30)]),
    st.booleans(),
    st.sampled_from([0.0, 0.3]),
)
def test_rank_pool_orders_and_scores_as_the_reference_formula(
    rows: list[tuple], ids: list[str], prefer: bool, lift: float
) -> None:
    policy = RankingPolicy(type_boost=0.3, session_lift=lift)
    candidates, ages = _candidates(rows, ids)
    pool = Pool.of(candidates)
    ranking = rank_pool(pool, policy, now=NOW, novelty_ages=ages, prefer_observations=prefer)
    # The reference sees the relevances as lifted (``rank`` lifts them in place).
    lifted = rank(candidates, policy, now=NOW, novelty_ages=ages, prefer_observations=prefer)
    expected = _reference(candidates, policy, ages, prefer)
    got = list(ranking)
    assert [s.candidate.document.event_id for s in got] == [
        s.candidate.document.event_id for s in expected
    ]
    assert [s.candidate.document.event_id for s in lifted] == [
        s.candidate.document.event_id for s in expected
    ]
    for mine, theirs in zip(got, expected, strict=True):
        assert mine.final == theirs.final  # to the bit
        assert dict(mine.signals) == dict(theirs.signals)
        assert mine.candidate.fused == theirs.candidate.fused
        assert mine.breakdown == theirs.breakdown


@settings(max_examples=100, deadline=None)
@given(st.lists(_ROW, min_size=1, max_size=20), st.permutations([f"m{n:02d}" for n in range(20)]))
def test_session_diversity_reorders_the_head_as_on_candidates(
    rows: list[tuple], ids: list[str]
) -> None:
    policy = RankingPolicy(session_diversity=0.5, diversify_depth=5)
    candidates, ages = _candidates(rows, ids)
    ranking = rank_pool(Pool.of(candidates), policy, now=NOW, novelty_ages=ages)
    expected = rank(candidates, policy, now=NOW, novelty_ages=ages)
    assert [s.candidate.document.event_id for s in ranking] == [
        s.candidate.document.event_id for s in expected
    ]


def test_a_row_is_built_once_and_slices_index_and_iteration_agree() -> None:
    candidates, _ = _candidates([(0.5, 0.5, 0, 0.0, FactType.WORLD, None, None)] * 4, list("dcba"))
    ranking = rank_pool(Pool.of(candidates), RankingPolicy(), now=NOW)
    assert len(ranking) == 4
    assert [s.candidate.document.event_id for s in ranking] == ["a", "b", "c", "d"]  # ties by id
    assert ranking[1] is ranking[:2][1] is list(ranking)[1]
    assert ranking[-1].candidate.document.event_id == "d"


def test_kept_skips_refused_documents_before_scoring_them() -> None:
    candidates, _ = _candidates(
        [(f, 0.5, 0, 0.0, FactType.WORLD, None, None) for f in (0.9, 0.8, 0.7)], ["x", "y", "z"]
    )
    ranking = rank_pool(Pool.of(candidates), RankingPolicy(), now=NOW)
    asked: list[str] = []

    def keep(document: object) -> bool:
        event_id = document.event_id  # type: ignore[attr-defined]
        asked.append(event_id)
        return bool(event_id != "y")

    kept = ranking.kept(keep)
    assert next(kept).candidate.document.event_id == "x"
    assert asked == ["x"]  # nothing further asked until read
    assert [s.candidate.document.event_id for s in kept] == ["z"]


def test_procedure_versions_older_than_the_newest_are_not_current() -> None:
    old = doc("p1").model_copy(update={"tags": ["procedure:p", "version:1"]})
    new = doc("p2").model_copy(update={"tags": ["procedure:p", "version:2"]})
    plain = doc("n")
    assert not is_current_version(old, {"p": 2})
    assert is_current_version(new, {"p": 2}) and is_current_version(plain, {"p": 2})
    assert is_current_version(old, {})


def test_the_pool_gives_the_candidates_contextual_fuse_gives() -> None:
    a = doc("a", session="s", at=0.0, text="Did you go?", embedding=(1.0, 0.0))
    b = doc("b", session="s", at=60.0, text="Yes, on Friday", embedding=(0.6, 0.8))
    c = doc("c", embedding=(0.0, 1.0))
    near = doc("n", session="s", at=120.0, embedding=(0.8, 0.6))
    args = dict(
        query_vector=[1.0, 0.0],
        analysis=analyse_query("when did you go?"),
        policy=RankingPolicy(),
        neighbours=[near],
    )
    text, vector = hits((a, 3.0), (b, 1.0)), hits((c, 0.2), (a, 0.9))
    pool = contextual_pool(text, vector, **args)  # type: ignore[arg-type]
    fused = contextual_fuse(text, vector, **args)  # type: ignore[arg-type]
    assert pool.candidates() == fused
    by_id = {c.document.event_id: c for c in fused}
    assert by_id["n"].cosine is not None  # measured by fusion, no engine score
    assert by_id["n"].bm25_rank is None and by_id["a"].vector_rank == 2


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.datetimes(
            min_value=datetime(1990, 1, 1),
            max_value=datetime(2060, 1, 1),
            timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
        ),
        min_size=1,
        max_size=10,
    ),
    st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2050, 1, 1), timezones=st.just(UTC)
    ),
    st.sampled_from([30.0, 1.0, 0.37]),
)
def test_recency_from_microseconds_equals_recency_to_the_bit(
    times: list[datetime], now: datetime, half_life: float
) -> None:
    docs = [
        doc(f"m{n}").model_copy(update={"timestamp": moment.isoformat()})
        for n, moment in enumerate(times)
    ]
    column = _recency_column(docs, now, half_life)
    assert column == [recency(d.timestamp, now, half_life_days=half_life) for d in docs]


def _links_one_by_one(docs: list, max_gap_s: float) -> tuple[tuple, tuple]:
    """Neighbour links as first written: each session's members sorted, then walked."""
    before: list[int | None] = [None] * len(docs)
    after: list[int | None] = [None] * len(docs)
    sessions: dict[str, list[tuple[float, str, int]]] = {}
    for n, d in enumerate(docs):
        if d.session_id is not None:
            at = datetime.fromisoformat(d.timestamp.replace("Z", "+00:00")).timestamp()
            sessions.setdefault(d.session_id, []).append((at, d.event_id, n))
    for members in sessions.values():
        members.sort()
        for (t0, _, first), (t1, _, second) in zip(members, members[1:], strict=False):
            if t1 - t0 <= max_gap_s:
                after[first], before[second] = second, first
    return tuple(before), tuple(after)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["s1", "s2", None]), st.sampled_from([0.0, 30.0, 60.0, 61.5, 500.0])
        ),
        max_size=25,
    ),
    st.permutations([f"t{n:02d}" for n in range(25)]),
    st.sampled_from([0.0, 60.0, 3_600.0]),
)
def test_neighbour_links_on_arrays_equal_the_walk_per_session(
    rows: list[tuple[str | None, float]], ids: list[str], gap: float
) -> None:
    docs = [doc(i, session=s, at=at) for i, (s, at) in zip(ids, rows, strict=False)]
    links = neighbour_links(docs, max_gap_s=gap)
    assert (links.before, links.after) == _links_one_by_one(docs, gap)
