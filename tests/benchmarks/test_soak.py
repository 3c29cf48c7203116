"""The soak's arithmetic and verdict, and a short soak run end to end."""

from __future__ import annotations

import json

import pytest
from benchmarks.soak import (
    Sample,
    _per_document,
    _round_totals,
    _round_totals_from_text,
    cpu_shares,
    describe,
    main,
    pace_counts,
    pace_per_s,
    percentile,
    rounds_in,
    slope_per_min,
    verdict,
)
from prometheus_client import generate_latest

from cogsub.core.memory import ConsolidationReport
from cogsub.telemetry.metrics import Metrics


def _sample(
    t_s: float,
    rss_mib: float,
    documents: int,
    *,
    lag: int = 0,
    extraction_lag: int = 0,
    data_mib: float = 0.0,
    sqlite_mib: float = 0.0,
) -> Sample:
    return Sample(
        t_s, 0, 0, 0.0, lag, extraction_lag, rss_mib, data_mib, sqlite_mib, documents,
        0, 0.0, 0.0, 0, 0.0, 0.0,
    )  # fmt: skip


def _soak(extraction_lags: list[int], *, other_mib: list[float] | None = None) -> list[Sample]:
    """Samples every 10 s with these extraction lags and other memory; the index data
    grows all along and SQLite's cache fills up to 100 MiB."""
    other = other_mib or [200.0] * len(extraction_lags)
    samples = []
    for i, (lag, mib) in enumerate(zip(extraction_lags, other, strict=True)):
        data, cache = 2.0 * i, min(100.0, 20.0 * i)
        samples.append(
            _sample(10.0 * i, data + cache + mib, 1_000 * i, extraction_lag=lag,
                    data_mib=data, sqlite_mib=cache)
        )  # fmt: skip
    return samples


def test_slope_is_per_minute_and_flat_is_zero() -> None:
    assert slope_per_min([(0, 10), (30, 20), (60, 30)]) == 20.0
    assert slope_per_min([(0, 5), (60, 5), (120, 5)]) == 0.0
    assert slope_per_min([(0, 5)]) == 0.0


def test_memory_per_document_added_over_the_window() -> None:
    window = [_sample(0, 100.0, 1_000), _sample(60, 101.0, 3_048), _sample(120, 102.0, 5_096)]
    assert _per_document(window) == 512.0  # 2 MiB over 4,096 documents
    assert _per_document([_sample(0, 100.0, 7), _sample(60, 140.0, 7)]) == 0.0  # none added


def test_percentile_picks_from_the_sorted_values() -> None:
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.5) == 3.0
    assert percentile([], 0.99) == 0.0


def test_round_totals_come_from_the_round_metrics() -> None:
    metrics = Metrics()
    assert _round_totals(metrics) == {"rounds": 0, "round_s": 0.0, "decay_s": 0.0}
    for took_ms, decay_ms, decayed in ((4_000, 3_000, 7), (1_500, 0, 0)):
        report = ConsolidationReport(
            bank_id="b", took_ms=took_ms, decay_ms=decay_ms, decayed=decayed
        )
        metrics.record_round(report)
    assert _round_totals(metrics) == {"rounds": 2, "round_s": 5.5, "decay_s": 3.0}
    # A consolidator process's /metrics page says the same.
    page = generate_latest(metrics.registry).decode()
    assert _round_totals_from_text(page) == {"rounds": 2, "round_s": 5.5, "decay_s": 3.0}
    assert _round_totals_from_text("") == {"rounds": 0, "round_s": 0.0, "decay_s": 0.0}


@pytest.mark.parametrize(
    ("argv", "rule"),
    [
        (["--calibrate", "-1"], "--calibrate must be 0 or more events"),
        (["--backlog", "0"], "--backlog must be at least 1 event"),
        (["--rounds-first", "-1"], "--rounds-first must be 0 or more"),
        (["--calibrate-s", "10", "--warm-s", "9.5"], "--warm-s must leave more than a second"),
        (["--warm-s", "-1"], "--warm-s must leave more than a second"),
    ],
)
def test_a_calibration_that_measures_nothing_is_refused(
    argv: list[str], rule: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2
    assert rule in capsys.readouterr().err


def test_the_saturated_pace_is_the_slope_of_events_finished() -> None:
    # Finished in steps of a batch (commits), 400 a second on average: the slope, not
    # the last point over the window, which a commit just before or after would move.
    steps = [(t / 4, 256 * int(t * 100 / 256)) for t in range(8, 240)]
    assert pace_per_s(steps) == pytest.approx(400, rel=0.01)
    assert pace_per_s([(1.0, 500)]) == 0.0  # one point: no pace


def test_the_host_share_idle_and_stolen_comes_from_proc_stat_deltas() -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice
    before = [100, 0, 50, 1_000, 10, 0, 0, 5, 0, 0]
    after = [160, 0, 70, 1_100, 10, 0, 0, 25, 0, 0]  # 200 ticks: 100 idle, 20 stolen
    assert cpu_shares(before, after) == (50.0, 10.0)
    assert cpu_shares(before, before) == (0.0, 0.0)


def test_other_memory_is_what_is_neither_index_data_nor_sqlite() -> None:
    sample = _sample(0, 500.0, 0, data_mib=120.0, sqlite_mib=80.0)
    assert sample.other_mib == 300.0


def test_a_lag_that_comes_back_down_after_a_round_held() -> None:
    lags = [300, 250, 400, 280, 320, 9_000, 14_000, 6_000, 900, 310, 270, 330]
    result = verdict(_soak(lags), 400.0, hold_s=5.0, memory_mib=16.0)
    assert result["held"], result
    assert result["checks"]["extraction_lag"] == {
        "floor_start": 250, "floor_end": 270, "allowed_growth": 2_000, "held": True
    }  # fmt: skip
    assert "load HELD" in describe(result)


def test_a_lag_whose_floor_keeps_rising_did_not_hold() -> None:
    # 400 events/s soaked, 390 extracted: 100 more behind every 10 s sample.
    lags = [300 + 100 * i for i in range(36)]
    result = verdict(_soak(lags), 400.0, hold_s=5.0, memory_mib=16.0)
    assert not result["held"]
    check = result["checks"]["extraction_lag"]
    assert (check["floor_start"], check["floor_end"], check["held"]) == (300, 3_000, False)
    assert result["checks"]["lag"]["held"]  # ingestion's stayed at 0
    assert "extraction_lag: floor 300 in the first quarter, 3,000 in the last" in describe(result)
    assert "load NOT HELD" in describe(result)
    # The same run at a rate whose 5 s allow that much is judged held.
    assert verdict(_soak(lags), 600.0, hold_s=5.0, memory_mib=16.0)["held"]


def test_memory_that_is_not_data_or_cache_must_not_keep_growing() -> None:
    lags = [300] * 12
    filling = [100.0, 150.0, 190.0, 200.0, 201.0, 200.0, 202.0, 201.0, 203.0, 202.0, 201.0, 203.0]
    assert verdict(_soak(lags, other_mib=filling), 400.0, hold_s=5.0, memory_mib=16.0)["held"]
    leaking = [200.0 + 5 * i for i in range(12)]  # 5 MiB more every sample
    result = verdict(_soak(lags, other_mib=leaking), 400.0, hold_s=5.0, memory_mib=16.0)
    assert not result["held"]
    assert result["checks"]["other_memory"] == {
        "grown_mib": 30.0, "allowed_mib": 16.0, "held": False
    }  # fmt: skip


def test_rounds_in_counts_only_those_finished_within_the_window() -> None:
    # (seconds, events extracted, rounds finished so far)
    points = [(t, 100 * t, 0 if t < 20 else 3) for t in range(0, 90, 5)]
    assert rounds_in(points, 60) == 0  # the three ended at 20 s, before the last 60 s
    assert rounds_in(points, 70) == 3
    assert rounds_in([], 60) == 0


def test_the_pace_counts_on_a_grown_store_rounds_have_been_through_and_none_in_the_window() -> None:
    # (seconds, events extracted, rounds finished so far): ten rounds end at 20 s.
    points = [(t, 100 * t, 0 if t < 20 else 10) for t in range(0, 90, 5)]
    assert pace_counts(points, 60, events=8_500, rounds=10)
    assert not pace_counts(points, 60, events=9_000, rounds=10)  # the store not grown yet
    assert not pace_counts(points, 60, events=8_500, rounds=11)  # a bank not yet through one
    assert not pace_counts(points, 70, events=8_500, rounds=10)  # the rounds in the window
    assert pace_counts(points[:3], 60, events=0, rounds=0)  # no round asked for, none run
    assert not pace_counts([], 60, events=0, rounds=0)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_short_soak_prefills_measures_and_judges_itself(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--duration", "6", "--every", "2", "--calibrate", "0", "--calibrate-s", "6"]
    argv += ["--warm-s", "2", "--backlog", "300", "--prefill", "0.5", "--rounds-first", "0"]
    argv += ["--json"]
    code = main(argv)
    out, err = capsys.readouterr()
    summary = json.loads(out.strip().splitlines()[-1])
    assert code == (0 if summary["held"] else 1)
    assert set(summary["checks"]) == {"lag", "extraction_lag", "other_memory"}
    assert ("load HELD" if summary["held"] else "load NOT HELD") in err
    # The store was grown to half the events the soak adds before the maximum counted.
    target = 0.5 * 0.8 * summary["calibration_first_events_per_s"] * 6
    assert summary["calibration_store_events"] >= target > 0
    last = summary["samples"][-1]
    assert last["consolidator_rss_mib"] > 0 and last["rss_mib"] > last["consolidator_rss_mib"]
    assert last["index_data_mib"] > 0 and last["sqlite_mib"] > 0
    assert last["consolidator_cpu_pct"] > 0
    assert 0 < last["consolidator_other_mib"] < last["consolidator_rss_mib"]
