"""The lagging-search benchmark searches the same bank, written the same way, in its three runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from benchmarks.lagging_search import main, measure, parse


async def test_three_runs_search_while_writing_and_tantivys_are_compared(tmp_path: Path) -> None:
    args = parse(["--documents", "60", "--batch", "3", "--batches", "3", "--searches", "2"])
    args.workdir = tmp_path
    result = await measure(args)
    runs = result["runs"]
    assert [r["run"] for r in runs] == [
        "fts5",
        "tantivy, lagging (interval)",
        "tantivy, level (every write)",
    ]
    for row in runs:
        assert 0 < row["search_p50_ms"] <= row["search_p95_ms"] and row["batch_p50_ms"] > 0
    for row in runs[1:]:
        assert row["search_p95_over_fts5"] == round(
            row["search_p95_ms"] / runs[0]["search_p95_ms"], 3
        )
    assert os.listdir(tmp_path) == []  # each run's files are removed


@pytest.mark.parametrize("argv", [["--documents", "0"], ["--batches", "0"], ["--searches", "0"]])
def test_arguments_that_measure_nothing_are_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2
    assert argv[0] in capsys.readouterr().err
