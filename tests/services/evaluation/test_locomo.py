"""The LoCoMo evaluation end to end on a tiny generated file (hash embedder, real stack)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from cogsub.cli.eval import main as eval_main
from cogsub.embeddings.hash import HashEmbedder
from cogsub.evaluation import CachingEmbedder, LocomoOptions, evaluate_locomo
from cogsub.evaluation.metrics import Tally, evidence_recall, percentile
from cogsub.recall import RankingPolicy
from cogsub.recall.query import without_names
from tests.services.evaluation import synthetic

RATES = {"recall_any@1", "recall_all@1", "recall_any@3", "recall_all@3"}


def test_evidence_recall_and_tallies() -> None:
    assert evidence_recall(["a", "b", "c"], ["c", "x"], 3) == (True, False)
    assert evidence_recall(["a", "b", "c"], ["b", "a"], 2) == (True, True)
    assert evidence_recall(["a"], [], 1) == (False, False)
    tally = Tally((1, 2))
    tally.add(["a", "b"], ["b"])
    tally.add(["a", "b"], ["a", "z"])
    assert tally.rates() == {
        "recall_any@1": 0.5,
        "recall_all@1": 0.0,
        "recall_any@2": 1.0,
        "recall_all@2": 0.5,
    }
    assert percentile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.0 and percentile([], 0.95) == 0.0


async def test_every_turn_is_retained_and_every_fair_question_scored(tmp_path: Path) -> None:
    path = synthetic.write(tmp_path / "locomo.json", "conv-a", "conv-b")
    embedder = CachingEmbedder(HashEmbedder())
    # Lexical and context only: the hash embedder's cosines are noise.
    options = LocomoOptions(ks=(3, 1), policy=RankingPolicy(semantic_weight=0.0))
    report = await evaluate_locomo(path, embedder=embedder, options=options, work_dir=tmp_path)
    assert report["conversations"] == 2 and report["turns"] == 16
    assert report["k"] == [1, 3]
    assert report["questions"] == 8  # 4 of 6 per conversation: one adversarial, one unanswerable
    assert report["skipped_questions"] == 2
    assert set(report) >= RATES and set(report["bm25"]) >= RATES and set(report["vector"]) >= RATES
    categories = report["categories"]
    assert list(categories) == ["1", "2", "4"]
    assert categories["4"]["questions"] == 2 and categories["1"]["questions"] == 4
    for values in categories.values():
        assert set(values) >= RATES and set(values["bm25"]) >= RATES
    # "Bob: The cello, ..." holds no word of its question: BM25 alone cannot find it,
    # the pipeline finds it through the question before it.
    assert categories["4"]["recall_any@3"] == 1.0
    assert categories["4"]["bm25"]["recall_any@3"] == 0.0
    assert report["recall_any@3"] >= report["bm25"]["recall_any@3"]
    # Both conversations say the same: 8 distinct turns and 4 questions, each embedded once,
    # plus the name-free form recall embeds of each question that names someone.
    scored = [
        "What instrument is he learning these days?",
        "Where did Alice's sister move?",
        "What did Bob see at the lake?",
        "When did Bob go hiking?",
    ]
    name_free = {without_names(q) for q in scored} - set(scored)
    assert len(name_free) == 3
    assert embedder.misses == 8 + 4 + len(name_free)
    leftovers = await asyncio.to_thread(lambda: list(tmp_path.glob("cogsub-locomo-*")))
    assert not leftovers  # the per-conversation stacks are removed


def test_the_command_prints_one_json_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = synthetic.write(tmp_path / "locomo.json", "conv-a", "conv-b")
    argv = ["locomo", str(path), "--json", "--embedder", "hash", "--k", "1", "--k", "3"]
    assert eval_main([*argv, "--limit-conversations", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["conversations"] == 1 and report["questions"] == 4
    assert set(report) >= RATES and {"bm25", "vector", "categories"} <= set(report)


def test_the_command_prints_tables_and_refuses_missing_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = synthetic.write(tmp_path / "locomo.json")
    assert eval_main(["locomo", str(path), "--embedder", "hash", "--no-captions"]) == 0
    out = capsys.readouterr().out
    assert "evidence recall" in out and "pipeline" in out and "any@10" in out
    assert eval_main(["locomo", str(tmp_path / "missing.json")]) == 2
    assert eval_main(["locomo", str(path), "--k", "0"]) == 2
