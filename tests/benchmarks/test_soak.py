"""The soak's summary arithmetic: trends per minute and memory per document added."""

from __future__ import annotations

import pytest
from benchmarks.soak import (
    Sample,
    _per_document,
    _round_totals,
    _round_totals_from_text,
    main,
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


@pytest.mark.parametrize("argv", [["--calibrations", "0"], ["--calibrate", "0"]])
def test_a_soak_without_a_burst_to_calibrate_on_is_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2
    assert f"{argv[0]} must be at least 1" in capsys.readouterr().err
