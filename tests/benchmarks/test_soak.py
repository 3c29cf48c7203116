"""The soak's summary arithmetic: trends per minute and memory per document added."""

from __future__ import annotations

import pytest
from benchmarks.soak import (
    Sample,
    _per_document,
    _round_totals,
    _round_totals_from_text,
    main,
    pace_per_s,
    percentile,
    slope_per_min,
)
from prometheus_client import generate_latest

from cogsub.core.memory import ConsolidationReport
from cogsub.telemetry.metrics import Metrics


def _sample(t_s: float, rss_mib: float, documents: int) -> Sample:
    return Sample(t_s, 0, 0, 0.0, 0, 0, rss_mib, 0.0, documents, 0, 0.0, 0.0, 0, 0.0, 0.0)


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
