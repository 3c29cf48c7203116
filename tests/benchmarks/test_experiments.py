"""The seed's experiments: metrics on hand-checked cases, and the deterministic reproductions."""

from __future__ import annotations

import json
import math

import pytest
from benchmarks.experiment_corpus import CLUSTERS, LINKS, MEMORIES, TURNS, cluster_of
from benchmarks.experiments import (
    age_right_after,
    breadth,
    cluster_coverage,
    count_bonus_run,
    hit_rate,
    main,
    measure,
    session_novelty,
    static_importance,
)


def test_hit_rate_counts_turns_with_any_target() -> None:
    targets = [frozenset({"a1"}), frozenset({"b1"}), frozenset()]
    retrieved = [["a2", "a1"], ["a2"], ["b1"]]
    assert hit_rate(targets, retrieved) == pytest.approx(1 / 3)


def test_hit_rate_of_no_turns_is_zero() -> None:
    assert hit_rate([], []) == 0.0


def test_cluster_coverage_is_the_share_of_clusters_seen() -> None:
    assert cluster_coverage([["a1"], ["a2", "a3"]], CLUSTERS) == pytest.approx(1 / 3)
    assert cluster_coverage([["a1"], ["b2"]], CLUSTERS) == pytest.approx(2 / 3)
    assert cluster_coverage([["a1"], ["b2"], ["c2"]], CLUSTERS) == 1.0


def test_breadth_of_an_even_spread_is_one() -> None:
    assert breadth([["a1", "a2"], ["a2", "a1"]]) == pytest.approx(1.0)


def test_breadth_of_one_id_is_zero() -> None:
    assert breadth([["a1"], ["a1"]]) == 0.0
    assert breadth([]) == 0.0


def test_breadth_normalises_by_the_distinct_ids_retrieved() -> None:
    # Counts 2, 1, 1: entropy 1.5 bits over log2(3) bits.
    assert breadth([["a1", "a2", "a3"], ["a1"]]) == pytest.approx(1.5 / math.log2(3))
    # Counts 3, 1: entropy 0.8113 bits over 1 bit.
    assert breadth([["a1"], ["a1"], ["a1", "b1"]]) == pytest.approx(0.811278, abs=1e-6)


def test_measure_counts_clusters_and_unique_ids() -> None:
    turns = TURNS[:2]
    metrics = measure(turns, [["a1", "c1"], ["b2", "a1"]])
    assert metrics.hits == 2
    assert metrics.clusters == {"A": 2, "B": 1, "C": 1}
    assert metrics.unique_ids == 3
    assert metrics.coverage == 1.0


def test_corpus_matches_the_seed_table() -> None:
    ids = {m.memory_id for m in MEMORIES}
    assert len(MEMORIES) == 9 and len(TURNS) == 20 and len(LINKS) == 6
    assert [cluster_of(i) for i in sorted(ids)] == list("AAAABBBCC")
    assert all(t.targets <= ids and t.reinforced in ids for t in TURNS)
    assert all(link.source in ids and link.target in ids for link in LINKS)
    assert [t.number for t in TURNS if not t.targets] == [12]


def test_experiment_1_reproduces_70_and_33_percent_exactly() -> None:
    retrieved = static_importance(3)
    metrics = measure(TURNS, retrieved)
    assert all(ids == ["a1", "a2", "a3"] for ids in retrieved)
    assert (metrics.hits, metrics.turns) == (14, 20)
    assert metrics.coverage == pytest.approx(1 / 3)
    assert metrics.clusters == {"A": 60, "B": 0, "C": 0}


def test_static_importance_at_k5_reaches_90_and_67_percent() -> None:
    metrics = measure(TURNS, static_importance(5))
    assert metrics.hits == 18
    assert metrics.coverage == pytest.approx(2 / 3)


def test_experiment_3_with_the_seeds_ages_reproduces_the_headline() -> None:
    metrics = measure(TURNS, session_novelty(0.5, 0.5, 5, seed_ages=True))
    assert metrics.hits == 19
    assert metrics.coverage == 1.0
    assert metrics.clusters == {"A": 66, "B": 30, "C": 4}
    assert metrics.unique_ids == 8
    assert round(metrics.breadth, 3) == 0.955


def test_session_novelty_reports_a_non_negative_age_right_after() -> None:
    assert age_right_after() in (0, 1)


def test_count_bonus_counts_the_seeds_reinforcements() -> None:
    runs = [count_bonus_run(cb) for cb in (0.0, 0.02, 0.05)]
    assert {(r.a1_count, r.c1_count) for r in runs} == {(15, 10)}
    assert runs[0].a1 == pytest.approx(0.85) and runs[0].c1 == pytest.approx(0.30)
    assert runs[0].a1 < runs[1].a1 < runs[2].a1
    assert runs[0].c1 < runs[1].c1 < runs[2].c1
    assert all(r.c1_max == pytest.approx(r.c1) for r in runs)  # c1's bonus only grows


def test_count_bonus_feedback_loop_bumps_the_returned_memories() -> None:
    run = count_bonus_run(0.02, feedback_k=3)
    assert (run.a1_count, run.c1_count) == (100, 0)


def test_main_prints_json_and_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["deterministic"] is True
    assert len(report["experiment_3"]["grid"]) == 9
    assert [r["cb"] for r in report["experiment_10"]] == [0.0, 0.02, 0.05]
    assert main([]) == 0
    text = capsys.readouterr().out
    assert "| static importance | 3 | 70% (14/20) | 33% |" in text
    assert "Why the numbers differ" in text
