"""The answer's chat call against the real local chat server: output rules, timeouts, citations."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from structlog.testing import capture_logs

from cogsub.core.context import AnswerRequest, ContextBlock, ContextRequest
from cogsub.core.errors import ConfigurationError, NotConfiguredError, UnavailableError
from cogsub.core.events import FactType
from cogsub.core.memory import RecallRequest, RecallResponse
from cogsub.recall.answer import (
    ChatAnswerer,
    ChatSettings,
    answer,
    cited_in_block,
    user_message,
)
from cogsub.recall.context_block import lay_out
from tests.fixtures.chat_server import ChatServer
from tests.services.recall.test_context_block import hit

API_KEY = "sk-answer-test-5b1c9e0d7a"
BLOCK = lay_out(
    "jane",
    ContextRequest(query="where is Acme?"),
    [hit("hq", FactType.WORLD, "Acme HQ is in Berlin."), hit("p", FactType.PREFERENCE)],
)


def answerer(server: ChatServer, timeout_s: float = 5.0, max_attempts: int = 3) -> ChatAnswerer:
    settings = ChatSettings(
        base_url=server.api_url,
        model="gpt-4o-mini",
        api_key=API_KEY,
        timeout_s=timeout_s,
        max_attempts=max_attempts,
        backoff_base_s=0.01,
    )
    return ChatAnswerer(settings)


class Recalled:
    """A recall port serving fixed hits, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.asked: list[RecallRequest] = []

    async def recall(self, bank_id: str, request: RecallRequest) -> RecallResponse:
        self.calls += 1
        self.asked.append(request)
        results = [hit("hq", FactType.WORLD, "Acme HQ is in Berlin.")]
        return RecallResponse(
            bank_id=bank_id, query=request.query, results=results, candidates=1, tokens=6
        )


def reply(text: str, cited: list[str]) -> str:
    return json.dumps({"answer": text, "cited": cited})


async def test_the_model_gets_the_block_and_its_citations_are_checked(
    chat_server: ChatServer,
) -> None:
    await chat_server.reply(reply("In Berlin.", ["hq", "ghost", "hq"]))
    with capture_logs() as logs:
        answered = await answer(
            Recalled(), answerer(chat_server), "jane", AnswerRequest(question="where is Acme?")
        )
    assert (answered.answer, answered.cited) == ("In Berlin.", ["hq"])
    (dropped,) = [e for e in logs if e["event"] == "answer_citations_dropped"]
    assert dropped["dropped"] == ["ghost"]
    (sent,) = await chat_server.requests()
    assert sent["authorization"] == f"Bearer {API_KEY}"
    assert sent["body"]["temperature"] == 0
    assert (
        "- [hq] 2024-05-01 world: Acme HQ is in Berlin." in sent["body"]["messages"][1]["content"]
    )


async def test_the_block_behind_an_answer_recalls_with_its_tags_and_session(
    chat_server: ChatServer,
) -> None:
    await chat_server.reply(reply("In Berlin.", ["hq"]))
    recalled = Recalled()
    asked = AnswerRequest(question="where is Acme?", tags=["ops"], session_id="s-1")
    await answer(recalled, answerer(chat_server), "jane", asked)
    (request,) = recalled.asked
    assert (request.tags, request.session_id) == (["ops"], "s-1")


def test_cited_ids_keep_first_mention_order_once() -> None:
    assert cited_in_block(["p", "x", "hq", "p", "x"], BLOCK) == (["p", "hq"], ["x"])


@pytest.mark.parametrize(
    ("kind", "params", "rule"),
    [
        ("content", {"content": "Berlin, I think."}, "not valid JSON"),
        ("content", {"content": json.dumps({"answer": "Berlin"})}, "cited"),
        ("content", {"content": json.dumps({"answer": "", "cited": []})}, "answer"),
        ("content", {"content": "   "}, "no content"),
        ("refusal", {}, "refused"),
        ("length", {"content": '{"answer": "Ber'}, "cut short"),
        ("content", {"content": "{}", "finish_reason": "content_filter"}, "content filter"),
    ],
)
async def test_unusable_output_is_unavailable_naming_the_rule(
    chat_server: ChatServer, kind: str, params: dict[str, Any], rule: str
) -> None:
    await chat_server.queue(kind, **params)
    with capture_logs() as logs, pytest.raises(UnavailableError, match=rule):
        await answerer(chat_server).ask("where is Acme?", BLOCK)
    assert [e["rule"] for e in logs if e["event"] == "answer_rejected"]
    assert len(await chat_server.requests()) == 1  # unusable output is not asked again


async def test_a_fenced_answer_is_read(chat_server: ChatServer) -> None:
    await chat_server.reply("```json\n" + reply("Berlin.", ["hq"]) + "\n```")
    assert await answerer(chat_server).ask("q", BLOCK) == ("Berlin.", ["hq"])


async def test_a_hung_model_times_out_and_is_retried_then_gives_up(
    chat_server: ChatServer,
) -> None:
    await chat_server.queue("hang", count=2, hang_s=5.0)
    await chat_server.reply(reply("Berlin.", ["hq"]))
    started = time.monotonic()
    assert await answerer(chat_server, timeout_s=0.3).ask("q", BLOCK) == ("Berlin.", ["hq"])
    assert time.monotonic() - started < 4.0
    await chat_server.queue("hang", count=2, hang_s=5.0)
    with pytest.raises(UnavailableError, match="gave up after 2 attempts"):
        await answerer(chat_server, timeout_s=0.3, max_attempts=2).ask("q", BLOCK)


async def test_throttling_is_retried_and_a_wrong_key_is_a_configuration_error(
    chat_server: ChatServer,
) -> None:
    await chat_server.queue("429", retry_after_ms=10)
    await chat_server.queue("503")
    await chat_server.reply(reply("Berlin.", []))
    assert await answerer(chat_server).ask("q", BLOCK) == ("Berlin.", [])
    chat_server.reset(api_key="sk-the-right-key-0000")
    with pytest.raises(ConfigurationError) as raised:
        await answerer(chat_server).ask("q", BLOCK)
    assert API_KEY not in str(raised.value)


async def test_without_a_model_nothing_is_recalled_and_the_settings_are_named() -> None:
    recalled = Recalled()
    with pytest.raises(NotConfiguredError, match="COGSUB_CONSOLIDATION__LLM_BASE_URL"):
        await answer(recalled, None, "jane", AnswerRequest(question="q"))
    assert recalled.calls == 0


def test_a_model_name_is_required() -> None:
    with pytest.raises(ConfigurationError, match="model"):
        ChatAnswerer(ChatSettings(base_url="http://127.0.0.1:9/v1", model=""))


def test_an_empty_block_is_said_so_to_the_model() -> None:
    empty = ContextBlock(
        bank_id="b", query="q", format="markdown", tokens=0, max_tokens=10, text="", sections=[]
    )
    assert "(no memories matched)" in user_message("q", empty)
