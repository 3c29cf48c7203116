"""`python -m benchmarks.extraction` runs, and its two readings of the date rules agree."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.extraction import main


def test_the_benchmark_prints_its_rows_and_checks_both_readings_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-locomo.json"
    assert main(["--events", "200", "--repeats", "1", "--locomo", str(missing)]) == 0
    printed = capsys.readouterr().out
    assert "soak events: 200 texts" in printed and "same mentions: True" in printed
    assert f"LoCoMo turns: skipped, no file at {missing}" in printed


def test_nothing_to_time_is_refused() -> None:
    with pytest.raises(SystemExit) as refused:
        main(["--events", "0"])
    assert refused.value.code == 2
