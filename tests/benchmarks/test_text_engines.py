"""`python -m benchmarks.text_engines`: both engines find the same document, in its bank only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.english_corpus import LOCOMO_DEV
from benchmarks.text_engines import build_fts5, build_tantivy, main

TEXTS = [
    "We went camping with the kids and the lake was freezing.",
    "My pottery class meets on Tuesdays and I love the wheel.",
    "The adoption agency called, so we are preparing the spare room.",
    "Camping again next month, the kids want to see the lake.",
] * 5  # 20 documents over 3 banks: position p holds text p % 4 in bank p % 3


@pytest.mark.parametrize("engine", ["fts5", "tantivy"])
async def test_each_engine_answers_in_the_asked_bank_only(engine: str, tmp_path: Path) -> None:
    built = (
        await build_fts5(tmp_path, TEXTS, 3)
        if engine == "fts5"
        else build_tantivy(tmp_path, TEXTS, 3, 1)
    )
    try:
        # Text 1 is in bank 1 at positions 1 and 13 (and in the other banks elsewhere);
        # "potteries" reaches "pottery" only through stemming.
        assert sorted(built.search("bank-001", ["potteries"])) == [1, 13]
        assert sorted(built.search("bank-002", ["camping", "lake"])) == [8, 11]
        assert built.search("bank-000", ["zeppelin"]) == []
    finally:
        built.close()


@pytest.mark.skipif(not LOCOMO_DEV.is_file(), reason=f"no LoCoMo dev split at {LOCOMO_DEV}")
def test_the_benchmark_records_both_engines_and_their_ratio(
    tmp_path: Path, bench_results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--sizes", "2000", "--banks", "5", "--rounds", "1", "--workdir", str(tmp_path)]
    assert main(argv) == 0
    (row,) = json.loads((bench_results / "text_engines.json").read_text())["figures"]
    assert row["documents"] == 2000 and row["banks"] == 5 and row["queries"] > 250
    for engine in ("fts5", "tantivy"):
        assert 0 < row[engine]["p50_ms"] <= row[engine]["p95_ms"]
    # The dev questions share words with the corpus made of the same conversations.
    assert 0.5 < row["tantivy"]["overlap_at_10_with_fts5"] <= 1.0
    assert row["tantivy_over_fts5"]["p95_ms"] > 0
    assert "tantivy/FTS5" in capsys.readouterr().out


def test_a_missing_dev_split_stops_it_with_the_place_it_belongs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--sizes", "100", "--locomo-file", str(tmp_path / "absent.json")])
    assert stopped.value.code == 2
    assert "../shared/datasets/locomo-dev/" in capsys.readouterr().err
