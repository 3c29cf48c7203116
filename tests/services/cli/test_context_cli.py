"""`cogsub context` and `cogsub answer` as a user runs them (the embedded stack in-process)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from cogsub.cli import main
from cogsub.recall.answer import ChatAnswerer
from cogsub.runtime.settings import ConsolidationSettings
from cogsub.runtime.wiring import build_answerer
from tests.fixtures.chat_server import ChatServer


def _cli(data_dir: Path, *args: str) -> list[str]:
    return ["--data-dir", str(data_dir), "--embedder", "hash", *args]


def _retained(
    data_dir: Path, bank: str, text: str, kind: str, out: pytest.CaptureFixture[str]
) -> str:
    assert main(_cli(data_dir, "retain", bank, text, "--type", kind, "--json")) == 0
    return str(json.loads(out.readouterr().out)["memory_id"])


def test_context_prints_the_block_in_markdown_or_json(
    data_dir: Path, unique_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rule = _retained(data_dir, unique_name, "No: deploy with make release.", "correction", capsys)
    fact = _retained(data_dir, unique_name, "Prod deploys run at 9:00.", "world", capsys)
    assert main(_cli(data_dir, "context", unique_name, "deploy prod", "--max-tokens", "300")) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"## Rules\n- [{rule}] (correction) No: deploy with make")
    assert f"## Facts\n- [{fact}] " in captured.out
    assert "tokens" in captured.err
    args = ["context", unique_name, "deploy", "--format", "json", "--types", "world"]
    assert main(_cli(data_dir, *args)) == 0
    block = json.loads(capsys.readouterr().out)
    assert block["text"] == "" and [s["name"] for s in block["sections"]] == ["facts"]


def test_answer_without_a_model_says_what_to_set(
    data_dir: Path, unique_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_cli(data_dir, "answer", unique_name, "how do I deploy?")) == 1
    assert "COGSUB_CONSOLIDATION__EXTRACTOR=llm" in capsys.readouterr().err


def test_a_bad_budget_is_refused_naming_the_field(
    data_dir: Path, unique_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_cli(data_dir, "context", unique_name, "q", "--max-tokens", "0")) == 1
    assert "max_tokens" in capsys.readouterr().err


def test_the_answer_model_is_the_llm_extractors() -> None:
    assert build_answerer(ConsolidationSettings(extractor="offline")) is None
    assert build_answerer(ConsolidationSettings(extractor="none")) is None
    chosen = build_answerer(
        ConsolidationSettings(extractor="llm", llm_base_url="http://127.0.0.1:9/v1/")
    )
    assert isinstance(chosen, ChatAnswerer)
    assert chosen.url == "http://127.0.0.1:9/v1/chat/completions"


def test_answer_with_the_extractors_model_prints_the_cited_memories(
    data_dir: Path,
    unique_name: str,
    chat_server: ChatServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("COGSUB_CONSOLIDATION__EXTRACTOR", "llm")
    monkeypatch.setenv("COGSUB_CONSOLIDATION__LLM_BASE_URL", chat_server.api_url)
    rule = _retained(
        data_dir, unique_name, "When deploying, tag the release.", "preference", capsys
    )
    said = json.dumps({"answer": "Tag the release first.", "cited": [rule, "invented"]})
    asyncio.run(chat_server.reply(said))
    assert main(_cli(data_dir, "answer", unique_name, "how do I deploy?")) == 0
    out = capsys.readouterr().out
    assert out.startswith("Tag the release first.\n")
    assert f"cited: {rule} (rules)" in out and "invented" not in out
    assert [r["answer"] for r in asyncio.run(chat_server.requests())] == ["content"]
