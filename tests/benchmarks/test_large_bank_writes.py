"""The large-bank writes benchmark times the same batches on the three runs it compares."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from benchmarks.large_bank_writes import main, measure, parse


async def test_three_runs_write_the_same_batches_and_tantivys_are_compared(
    tmp_path: Path,
) -> None:
    argv = ["--banks", "3", "--per-bank", "30", "--large-bank", "20", "--batch", "6"]
    args = parse([*argv, "--batches", "4", "--workdir", str(tmp_path)])
    result = await measure(args)
    runs = result["runs"]
    assert [r["run"] for r in runs] == ["fts5", "tantivy, every write", "tantivy, interval"]
    assert [r["text_catch_up_s"] for r in runs][:2] == [0.0, 0.0]
    for row in runs:
        assert row["documents_per_s"] > 0 and 0 < row["batch_p50_ms"] <= row["batch_max_ms"]
    for row in runs[1:]:
        assert row["rate_over_fts5"] == round(
            row["documents_per_s"] / runs[0]["documents_per_s"], 3
        )
    assert os.listdir(tmp_path) == []  # each run's files are removed


@pytest.mark.parametrize(
    "argv", [["--banks", "0"], ["--batches", "0"], ["--per-bank", "10", "--large-bank", "20"]]
)
def test_arguments_that_measure_nothing_are_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2
    assert argv[0] in capsys.readouterr().err
