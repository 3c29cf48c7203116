"""LLMExtractor against a real local OpenAI-compatible chat server that replays the API."""

from __future__ import annotations

import email.utils
import json
import socket
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, date, datetime
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from cogsub.core.errors import ConfigurationError, UnavailableError
from cogsub.core.events import EventType, FactType
from cogsub.extraction import (
    EXTRACTED_TYPES,
    ExtractedFact,
    ExtractionInput,
    ExtractionRejected,
    FactExtractor,
    LLMExtractor,
)
from cogsub.extraction.llm import FACTS_SCHEMA, SYSTEM_PROMPT
from tests.fixtures.chat_server import ChatServer

API_KEY = "sk-test-9d2e7c41b6a04f3e8a5c"
MODEL = "gpt-4o-mini"
ITEM = ExtractionInput(
    source_event_id="evt-0042",
    text="Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    event_time=datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
    event_type=EventType.USER_INPUT,
    speaker="Caroline",
)

MakeExtractor = Callable[..., LLMExtractor]


def facts_json(*facts: dict[str, Any]) -> str:
    return json.dumps({"facts": list(facts)})


GOOD = {
    "text": "Caroline went to a LGBTQ support group on 7 May 2023.",
    "fact_type": "world",
    "occurred_on": "2023-05-07",
    "entities": ["Caroline", "LGBTQ"],
}


@pytest.fixture
async def make(chat_server: ChatServer) -> AsyncIterator[MakeExtractor]:
    """Builds extractors with fast retries against the fixture server; closes them after."""
    made: list[LLMExtractor] = []

    def build(**options: Any) -> LLMExtractor:
        settings: dict[str, Any] = {
            "base_url": chat_server.api_url,
            "model": MODEL,
            "api_key": API_KEY,
            "max_attempts": 3,
            "backoff_base_s": 0.01,
            "backoff_max_s": 5.0,
            "timeout_s": 5.0,
        }
        settings.update(options)
        extractor = LLMExtractor(**settings)
        made.append(extractor)
        return extractor

    yield build
    for extractor in made:
        await extractor.close()


async def test_valid_output_becomes_facts(make: MakeExtractor, chat_server: ChatServer) -> None:
    experience = {
        "text": "I suggested counseling courses to Caroline.",
        "fact_type": "experience",
        "occurred_on": None,
        "entities": [" Caroline ", "Caroline", ""],
    }
    await chat_server.reply(facts_json(GOOD, experience))
    extractor: FactExtractor = make()
    assert extractor.name == f"llm:{MODEL}"
    assert await extractor.extract(ITEM) == [
        ExtractedFact(
            "Caroline went to a LGBTQ support group on 7 May 2023.",
            FactType.WORLD,
            date(2023, 5, 7),
            ("Caroline", "LGBTQ"),
        ),
        ExtractedFact(
            "I suggested counseling courses to Caroline.", FactType.EXPERIENCE, None, ("Caroline",)
        ),
    ]


async def test_request_carries_schema_event_time_and_speaker(
    make: MakeExtractor, chat_server: ChatServer
) -> None:
    await make().extract(ITEM)
    (request,) = await chat_server.requests()
    assert request["authorization"] == f"Bearer {API_KEY}"
    assert request["content_type"] == "application/json"
    body = request["body"]
    assert body["model"] == MODEL
    assert body["temperature"] == 0
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "facts", "strict": True, "schema": FACTS_SCHEMA},
    }
    system, user = body["messages"]
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert user["role"] == "user"
    assert "2023-05-08T13:56:00+00:00 (Monday 8 May 2023)" in user["content"]
    assert "Speaker: Caroline" in user["content"]
    assert "Event type: user_input" in user["content"]
    assert ITEM.text in user["content"]


def test_schema_offers_exactly_the_extracted_types() -> None:
    fact = FACTS_SCHEMA["properties"]["facts"]["items"]
    assert set(fact["properties"]["fact_type"]["enum"]) == {t.value for t in EXTRACTED_TYPES}
    # Strict structured output: every property required, nothing else allowed.
    assert set(fact["required"]) == set(fact["properties"])
    assert fact["additionalProperties"] is False


async def test_omitted_optional_fields_default(
    make: MakeExtractor, chat_server: ChatServer
) -> None:
    await chat_server.reply(facts_json({"text": "Jane owns billing.", "fact_type": "world"}))
    assert await make().extract(ITEM) == [ExtractedFact("Jane owns billing.", FactType.WORLD)]


async def test_fenced_json_is_accepted(make: MakeExtractor, chat_server: ChatServer) -> None:
    await chat_server.reply("```json\n" + facts_json(GOOD) + "\n```")
    (fact,) = await make().extract(ITEM)
    assert fact.occurred_on == date(2023, 5, 7)


@pytest.mark.parametrize(
    ("content", "rule"),
    [
        ("The user went to a group.", "content is not valid JSON"),
        ('{"facts": [', "content is not valid JSON"),
        ("", "the model returned no content"),
        (facts_json(), "the model returned no facts"),
        ('{"items": []}', "off the schema"),
        (facts_json(dict(GOOD, fact_type="opinion")), "facts.0.fact_type"),
        (facts_json(dict(GOOD, fact_type="observation")), "facts.0.fact_type"),
        (facts_json(dict(GOOD, confidence=0.9)), "facts.0.confidence"),
        (facts_json(dict(GOOD, text="   ")), "facts.0.text"),
        (facts_json(dict(GOOD, text="x" * 2001)), "facts.0.text"),
        (facts_json(GOOD, dict(GOOD, occurred_on="2023-02-30")), "facts.1.occurred_on"),
        (facts_json(dict(GOOD, occurred_on="07/05/2023")), "facts.0.occurred_on"),
        (facts_json(dict(GOOD, occurred_on="2023-05-07T10:00:00Z")), "facts.0.occurred_on"),
        (facts_json(dict(GOOD, entities="Caroline")), "facts.0.entities"),
        (facts_json(dict(GOOD, text=42)), "facts.0.text"),
        ('["not", "an", "object"]', "off the schema"),
    ],
)
async def test_bad_content_is_rejected_and_logged(
    make: MakeExtractor, chat_server: ChatServer, content: str, rule: str
) -> None:
    await chat_server.reply(content)
    with capture_logs() as logs, pytest.raises(ExtractionRejected) as caught:
        await make().extract(ITEM)
    assert caught.value.source_event_id == "evt-0042"
    assert rule in caught.value.rule
    assert [log for log in logs if log["event"] == "extraction_rejected"] == [
        {
            "event": "extraction_rejected",
            "log_level": "warning",
            "source_event_id": "evt-0042",
            "rule": caught.value.rule,
            "extractor": f"llm:{MODEL}",
        }
    ]
    assert len(await chat_server.requests()) == 1  # rejected output is not retried


@pytest.mark.parametrize(
    ("kind", "params", "rule"),
    [
        ("refusal", {"refusal": "I can't help with that."}, "refused: I can't help with that."),
        ("length", {"content": '{"facts": [{"text": "Caroline we'}, "finish_reason=length"),
        ("length", {"content": facts_json(GOOD)}, "finish_reason=length"),
        ("content", {"content": facts_json(GOOD), "finish_reason": "content_filter"}, "filter"),
    ],
)
async def test_refused_or_cut_output_is_rejected(
    make: MakeExtractor, chat_server: ChatServer, kind: str, params: dict[str, Any], rule: str
) -> None:
    await chat_server.queue(kind, **params)
    with pytest.raises(ExtractionRejected) as caught:
        await make().extract(ITEM)
    assert caught.value.source_event_id == "evt-0042"
    assert rule in caught.value.rule


async def test_429_waits_for_retry_after_then_succeeds(
    make: MakeExtractor, chat_server: ChatServer
) -> None:
    await chat_server.queue("429", retry_after=1)
    await chat_server.reply(facts_json(GOOD))
    started = time.monotonic()
    with capture_logs() as logs:
        (fact,) = await make().extract(ITEM)
    elapsed = time.monotonic() - started
    assert fact.text == GOOD["text"]
    # The jittered backoff alone is at most 10 ms: only Retry-After explains the wait.
    assert elapsed >= 0.95
    assert [r["answer"] for r in await chat_server.requests()] == ["429", "content"]
    (retry,) = [log for log in logs if log["event"] == "extraction_request_retrying"]
    assert retry["delay_s"] == 1.0
    assert retry["source_event_id"] == "evt-0042"


async def test_429_honours_an_http_date_retry_after(
    make: MakeExtractor, chat_server: ChatServer
) -> None:
    # RFC 9110 lets Retry-After be a date; whole seconds, so the wait is 1-2 s.
    await chat_server.queue("429", retry_after=email.utils.formatdate(time.time() + 2, usegmt=True))
    await chat_server.reply(facts_json(GOOD))
    started = time.monotonic()
    with capture_logs() as logs:
        await make().extract(ITEM)
    assert time.monotonic() - started >= 0.9
    (retry,) = [log for log in logs if log["event"] == "extraction_request_retrying"]
    assert 0.9 <= retry["delay_s"] <= 2.0


async def test_retry_after_is_capped(make: MakeExtractor, chat_server: ChatServer) -> None:
    await chat_server.queue("429", retry_after=3600)
    started = time.monotonic()
    await make(backoff_max_s=0.2).extract(ITEM)
    assert time.monotonic() - started < 3.0


async def test_5xx_are_retried(make: MakeExtractor, chat_server: ChatServer) -> None:
    await chat_server.queue("503")
    await chat_server.queue("500")
    await chat_server.reply(facts_json(GOOD))
    assert len(await make().extract(ITEM)) == 1
    assert len(await chat_server.requests()) == 3


async def test_503_every_time_is_unavailable_after_max_attempts(
    make: MakeExtractor, chat_server: ChatServer
) -> None:
    await chat_server.queue("503", count=10)
    with pytest.raises(UnavailableError, match="gave up after 3 attempts") as caught:
        await make(max_attempts=3).extract(ITEM)
    assert caught.value.retryable
    assert "503" in str(caught.value)
    assert len(await chat_server.requests()) == 3


async def test_a_hung_request_times_out_and_is_retried(
    make: MakeExtractor, chat_server: ChatServer
) -> None:
    await chat_server.queue("hang", hang_s=3.0)
    await chat_server.reply(facts_json(GOOD))
    started = time.monotonic()
    (fact,) = await make(timeout_s=0.4).extract(ITEM)
    assert fact.text == GOOD["text"]
    assert time.monotonic() - started < 2.5
    assert [r["answer"] for r in await chat_server.requests()] == ["hang", "content"]


async def test_a_slow_answer_within_the_timeout_is_used(
    make: MakeExtractor, chat_server: ChatServer
) -> None:
    await chat_server.queue("hang", hang_s=0.2, content=facts_json(GOOD))
    (fact,) = await make(timeout_s=3.0).extract(ITEM)
    assert fact.text == GOOD["text"]
    assert len(await chat_server.requests()) == 1


async def test_refused_connections_are_unavailable(make: MakeExtractor) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port any more.
    with pytest.raises(UnavailableError, match="ConnectError"):
        await make(base_url=f"http://127.0.0.1:{port}/v1", max_attempts=2).extract(ITEM)


async def test_wrong_key_is_configuration_error_and_never_shown(
    make: MakeExtractor, chat_server: ChatServer
) -> None:
    chat_server.reset(api_key="sk-the-right-one")
    extractor = make()
    with capture_logs() as logs, pytest.raises(ConfigurationError) as caught:
        await extractor.extract(ITEM)
    message = str(caught.value)
    assert "401" in message and "Incorrect API key provided: [redacted]" in message
    assert API_KEY not in message
    assert API_KEY not in repr(extractor)
    assert API_KEY not in repr(logs)
    assert len(await chat_server.requests()) == 1  # not retried


async def test_the_key_is_in_no_log_event(make: MakeExtractor, chat_server: ChatServer) -> None:
    await chat_server.queue("429", retry_after=0)
    await chat_server.queue("503")
    await chat_server.reply("not json")
    with capture_logs() as logs, pytest.raises(ExtractionRejected) as caught:
        await make().extract(ITEM)
    assert {log["event"] for log in logs} == {"extraction_request_retrying", "extraction_rejected"}
    assert API_KEY not in repr(logs)
    assert API_KEY not in str(caught.value)


async def test_wrong_path_is_configuration_error(
    make: MakeExtractor, chat_server: ChatServer
) -> None:
    # The server root without /v1: the endpoint is not there (404).
    with pytest.raises(ConfigurationError, match="404"):
        await make(base_url=chat_server.base_url).extract(ITEM)


async def test_400_is_configuration_error_with_the_server_message(
    make: MakeExtractor, chat_server: ChatServer
) -> None:
    await chat_server.queue("error", status=400, message="Invalid schema for response_format")
    with pytest.raises(ConfigurationError, match="Invalid schema for response_format"):
        await make().extract(ITEM)
    assert len(await chat_server.requests()) == 1


async def test_content_too_long_rejects_only_that_content(
    make: MakeExtractor, chat_server: ChatServer
) -> None:
    await chat_server.queue(
        "error",
        status=400,
        message="This model's maximum context length is 128000 tokens.",
        code="context_length_exceeded",
    )
    with pytest.raises(ExtractionRejected, match="too long") as caught:
        await make().extract(ITEM)
    assert caught.value.source_event_id == "evt-0042"


async def test_an_answer_that_is_no_chat_completion_is_configuration_error(
    make: MakeExtractor, chat_server: ChatServer
) -> None:
    await chat_server.queue("not_json")
    with pytest.raises(ConfigurationError, match="did not answer with a chat completion"):
        await make().extract(ITEM)


async def test_no_key_sends_no_authorization(make: MakeExtractor, chat_server: ChatServer) -> None:
    await make(api_key=None).extract(ITEM)
    (request,) = await chat_server.requests()
    assert request["authorization"] is None


async def test_a_shared_client_is_used_and_left_open(chat_server: ChatServer) -> None:
    async with httpx.AsyncClient() as client:
        extractor = LLMExtractor(chat_server.api_url + "/", MODEL, client=client)
        assert extractor.url == f"{chat_server.api_url}/chat/completions"
        assert len(await extractor.extract(ITEM)) == 1
        await extractor.close()
        assert not client.is_closed


async def test_close_releases_its_own_client(chat_server: ChatServer) -> None:
    extractor = LLMExtractor(chat_server.api_url, MODEL)
    await extractor.close()
    with pytest.raises(RuntimeError):
        await extractor.extract(ITEM)


@pytest.mark.parametrize(
    "options",
    [{"max_attempts": 0}, {"timeout_s": 0}, {"backoff_base_s": -1}, {"model": ""}],
)
def test_impossible_settings_are_refused(options: dict[str, Any]) -> None:
    settings: dict[str, Any] = {"base_url": "http://127.0.0.1:1/v1", "model": MODEL}
    settings.update(options)
    with pytest.raises(ConfigurationError):
        LLMExtractor(**settings)
