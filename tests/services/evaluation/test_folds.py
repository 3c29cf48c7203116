"""Leave-one-conversation-out: held-out folds, their spread, and candidates chosen on the others."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cogsub.cli.eval import main as eval_main
from cogsub.cli.eval import policy_with, tuned
from cogsub.embeddings.hash import HashEmbedder
from cogsub.evaluation import CachingEmbedder, LocomoOptions, evaluate_locomo
from cogsub.evaluation.folds import Answered, choose, selection_score, spread
from cogsub.recall import RankingPolicy
from tests.services.evaluation import synthetic


def _answered(pipeline: tuple[str, ...], evidence: tuple[str, ...] = ("a",)) -> Answered:
    return Answered("1", evidence, pipeline, (), ())


def test_a_candidate_is_chosen_on_the_other_conversations_only() -> None:
    good, bad = _answered(("a",)), _answered(("x",))
    # Candidate 1 wins on conv-a and loses on conv-b: each fold takes what won elsewhere.
    runs = {"conv-a": [[bad], [good]], "conv-b": [[good], [bad]]}
    assert choose(runs, "conv-a", 1) == 0  # chosen on conv-b, where 0 answered
    assert choose(runs, "conv-b", 1) == 1
    tied = {"conv-a": [[good], [good]], "conv-b": [[good], [good]]}
    assert choose(tied, "conv-a", 1) == 0  # ties keep the first listed
    assert choose({"conv-a": [[bad], [good]]}, "conv-a", 1) == 0  # nothing else to choose on


def test_selection_score_and_spread() -> None:
    both = _answered(("a", "b"), ("a", "b"))
    one = _answered(("a", "x"), ("a", "b"))
    assert selection_score([both, one], 2) == pytest.approx((2 + 1) / 2)
    assert selection_score([], 10) == 0.0
    assert spread([0.5, 0.9]) == {"min": 0.5, "max": 0.9, "mean": 0.7, "range": 0.4}


def test_policy_fields_are_set_by_name_and_type() -> None:
    policy = policy_with(RankingPolicy(), ["expand_top=12", "date_boost=0.5", "fusion=rrf"])
    assert (policy.expand_top, policy.date_boost, policy.fusion) == (12, 0.5, "rrf")
    assert policy_with(RankingPolicy(), ["name_free_vector=false"]).name_free_vector is False
    for wrong in ("nope=1", "expand_top=1.5", "expand_top", "name_free_vector=maybe"):
        with pytest.raises(ValueError):
            policy_with(RankingPolicy(), [wrong])
    assert [p.speaker_boost for p in tuned(RankingPolicy(), "speaker_boost=0,2")] == [0.0, 2.0]


async def test_each_conversation_is_a_held_out_fold(tmp_path: Path) -> None:
    path = synthetic.write(tmp_path / "locomo.json", "conv-a", "conv-b")
    options = LocomoOptions(ks=(1, 3), policy=RankingPolicy(semantic_weight=0.0), folds=True)
    report = await evaluate_locomo(
        path, embedder=CachingEmbedder(HashEmbedder()), options=options, work_dir=tmp_path
    )
    folds = report["folds"]
    assert [f["held_out"] for f in folds] == ["conv-a", "conv-b"]
    assert all(f["questions"] == 4 and f["candidate"] == 0 for f in folds)
    assert set(folds[0]["categories"]) == {"1", "2", "4"}
    # The two conversations are the same text: each fold scores what the whole run does.
    for rate in ("recall_any@1", "recall_all@3"):
        assert folds[0][rate] == folds[1][rate] == report[rate]
        assert report["spread"][rate]["range"] == 0.0


async def test_a_tuned_field_is_scored_only_on_folds_it_was_not_chosen_on(tmp_path: Path) -> None:
    path = synthetic.write(tmp_path / "locomo.json", "conv-a", "conv-b")
    # Candidate 0 weighs neither BM25 nor cosine: it ranks by id and recency, worse everywhere.
    blind = RankingPolicy(semantic_weight=0.0, lexical_weight=0.0)
    sighted = RankingPolicy(semantic_weight=0.0)
    options = LocomoOptions(ks=(1,), folds=True, candidates=(blind, sighted))
    report = await evaluate_locomo(
        path, embedder=CachingEmbedder(HashEmbedder()), options=options, work_dir=tmp_path
    )
    assert [f["candidate"] for f in report["folds"]] == [1, 1]
    assert report["candidates"] == [
        {"lexical_weight": 0.0, "semantic_weight": 0.0},
        {"semantic_weight": 0.0},
    ]


def test_the_command_reports_folds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = synthetic.write(tmp_path / "locomo.json", "conv-a", "conv-b")
    argv = ["locomo", str(path), "--embedder", "hash", "--folds", "--set", "semantic_weight=0"]
    assert eval_main([*argv, "--json", "--tune", "expand_top=30,0"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["folds"]) == 2 and set(report["spread"]) >= {"recall_all@10"}
    assert report["candidates"] == [
        {"semantic_weight": 0.0},
        {"semantic_weight": 0.0, "expand_top": 0},
    ]
    assert eval_main(argv) == 0
    out = capsys.readouterr().out
    assert "leave one conversation out" in out and "conv-b" in out and "spread" in out
    assert eval_main([*argv, "--set", "no_such_field=1"]) == 2
