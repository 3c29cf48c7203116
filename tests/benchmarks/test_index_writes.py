"""The index-writes benchmark times the same batches on copies of one index, both settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from benchmarks.index_writes import main, measure, parse


async def test_both_settings_write_the_same_batches_and_are_compared(tmp_path: Path) -> None:
    args = parse(
        [
            "--documents",
            "600",
            "--batches",
            "3",
            "--new",
            "40",
            "--patched",
            "5",
            "--repeats",
            "1",
            "--workdir",
            str(tmp_path),
        ]
    )
    result = await measure(args)
    assert result["baseline_pages"] == 1_000 and result["pages"] == args.pages
    for row in (result["baseline"], result["index"]):
        assert row["wall_s"] > 0 and row["cpu_s"] > 0
        assert row["documents"] == 600 + 3 * 40  # both copies took the same new facts
    assert result["ratios"]["wall_s"] > 0
    assert os.listdir(tmp_path) == []  # the copies are removed


@pytest.mark.parametrize("argv", [["--pages", "1000"], ["--batches", "0"], ["--patched", "-1"]])
def test_arguments_that_measure_nothing_are_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2
    assert argv[0] in capsys.readouterr().err
