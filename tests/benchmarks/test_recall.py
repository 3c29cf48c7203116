"""`python -m benchmarks.recall`: banks, the LoCoMo mode, and the figures targets are read from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.english_corpus import LOCOMO_DEV
from benchmarks.recall import main, synthetic_store

needs_dev_split = pytest.mark.skipif(
    not LOCOMO_DEV.is_file(), reason=f"no LoCoMo dev split at {LOCOMO_DEV}"
)


@needs_dev_split
def test_memories_spread_over_the_banks_and_questions_go_round_them() -> None:
    store = synthetic_store(30, 3, 6)
    memories = list(store.memories)
    assert [m.bank for m in memories[:4]] == [
        "bench-bank-000",
        "bench-bank-001",
        "bench-bank-002",
        "bench-bank-000",
    ]
    assert {bank for bank, _ in store.asks} == {m.bank for m in memories}
    assert all(15 <= len(m.text.split()) <= 60 for m in memories)


@pytest.mark.slow
@pytest.mark.model
@needs_dev_split
def test_a_store_over_banks_reports_recall_beside_the_embedding(
    tmp_path: Path, bench_results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--size", "1500", "--banks", "3", "--queries", "30", "--workdir", str(tmp_path)]
    assert main(argv) == 0
    (row,) = json.loads((bench_results / "recall-3-banks.json").read_text())["figures"]
    assert (row["memories"], row["banks"], row["queries"]) == (1500, 3, 30)
    excluded, embed_p50 = row["excluding_embedding"], row["minilm_query_embedding_p50_ms"]
    assert 0 < excluded["p50_ms"] <= excluded["p95_ms"] and embed_p50 > 0
    assert row["p95_over_embedding_p50"] == pytest.approx(excluded["p95_ms"] / embed_p50, 0.01)
    assert row["target_p95_ms"] == 60 and row["rss_store_growth_mib"] > 0
    assert row["rss_per_million_memories_mib"] is None  # 1,500 memories: fixed costs dominate
    again = row["repeated_questions"]  # cached query vectors: nothing embedded, CPU counted
    assert 0 < again["p50_ms"] <= again["p95_ms"] and again["cpu_ms_per_recall"] > 0
    printed = capsys.readouterr().out
    assert "hash-384" in printed and "(≤ 60: " in printed


@pytest.mark.model
def test_the_locomo_mode_asks_each_conversation_its_own_questions(
    tmp_path: Path, bench_results: Path
) -> None:
    turns = [
        {"speaker": "Ann", "dia_id": f"D1:{n}", "text": f"Ann adopted puppy number {n} today."}
        for n in range(1, 13)
    ]
    sample = {
        "sample_id": "conv-t",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": turns,
        },
        "qa": [
            {"question": f"When did Ann adopt puppy {n}?", "evidence": [f"D1:{n}"], "category": 2}
            for n in range(1, 12)
        ]
        + [
            {"question": "Unanswerable?", "evidence": [], "category": 5},
            {"question": "Elsewhere?", "evidence": ["D9:1"], "category": 1},
        ],
    }
    dataset = tmp_path / "locomo.json"
    dataset.write_text(json.dumps([sample]))
    argv = ["--locomo", "--locomo-file", str(dataset), "--workdir", str(tmp_path)]
    assert main(argv) == 0
    (row,) = json.loads((bench_results / "recall-locomo.json").read_text())["figures"]
    assert (row["store"], row["memories"], row["banks"], row["queries"]) == (
        "locomo-dev",
        12,
        1,
        11,
    )
    assert row["document_vectors"] == "MiniLM" and row["target_p95_ms"] == 15


def test_a_missing_dev_split_stops_it_with_the_place_it_belongs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--size", "100", "--locomo-file", str(tmp_path / "absent.json")])
    assert stopped.value.code == 2
    assert "../shared/datasets/locomo-dev/" in capsys.readouterr().err
