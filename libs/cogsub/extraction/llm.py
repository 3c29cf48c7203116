"""Fact extraction by a language model behind any OpenAI-compatible chat endpoint.

One ``POST {base_url}/chat/completions`` per piece of content, at temperature 0,
asking for structured output (``response_format`` of type ``json_schema``, strict).
The answer is validated before anything leaves this module: content that is not
JSON, off the schema, refused, cut short (``finish_reason: "length"``) or empty
raises ``ExtractionRejected`` and is logged with the source event id.

Throttling (429, honouring ``Retry-After``), 408/409, 5xx, timeouts and connection
errors are retried with capped exponential backoff and full jitter, up to
``max_attempts`` attempts in all, then raise ``UnavailableError``. Other 4xx
answers mean wrong settings and raise ``ConfigurationError`` with the server's
message, except a content-too-long answer, which rejects that one content.
The API key goes into the ``Authorization`` header only; it is scrubbed from
every message and log event.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Any, Literal

import httpx
import structlog
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints
from pydantic import ValidationError as PydanticValidationError

from cogsub.core.errors import ConfigurationError
from cogsub.core.events import FactType
from cogsub.extraction.ports import ExtractedFact, ExtractionInput, ExtractionRejected
from cogsub.openai_http import (
    Backoff,
    OpenAICompatibleEndpoint,
    ServerAnswer,
    UnusableReply,
    reply_content,
    wrong_settings,
)

__all__ = ["FACTS_SCHEMA", "SYSTEM_PROMPT", "LLMExtractor"]

_log = structlog.get_logger(__name__)

_TOO_LONG_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")

SYSTEM_PROMPT = """\
You turn content seen by an AI agent into facts for its long-term memory. Return \
every fact the content states, each as one short sentence that makes sense on its own.

Fact types:
- "world": a fact about the user, other people, things or the world ("Jane owns the \
billing service", "Caroline moved to Berlin"). Write it in the third person: a \
speaker's "I", "me" and "my" become the speaker's name, or "the user" when no name \
is given.
- "experience": something the agent itself did, saw or decided, kept in the first \
person ("I deployed billing on Friday and rolled back once"). Only the agent's own \
statements are experience: content of an agent_action event, or turns spoken by the \
assistant or agent.

Rules:
- Self-contained: name the people and things instead of "he", "it" or "they", and \
keep the details that matter (names, places, numbers, reasons).
- Dates: resolve relative dates ("yesterday", "last Friday", "two weeks ago", "next \
month") against the event time given with the content. Write the absolute day into \
the text ("went to a support group yesterday (7 May 2023)") and into occurred_on as \
YYYY-MM-DD; occurred_on is null when the fact names no day.
- Leave out greetings, thanks, small talk, questions and reactions that state nothing.
- Never add anything the content does not say.
- entities: the specific people, organisations, places, products and other named \
things the fact mentions, spelled as in the content.
Answer with JSON only, following the schema."""

FACTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "one self-contained fact"},
                    "fact_type": {"type": "string", "enum": ["world", "experience"]},
                    "occurred_on": {
                        "type": ["string", "null"],
                        "description": "the day the fact happened, YYYY-MM-DD, or null",
                    },
                    "entities": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["text", "fact_type", "occurred_on", "entities"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}
"""The JSON schema sent as ``response_format`` (strict structured output)."""


def _iso_day(value: object) -> object:
    # Parsed here, strictly: pydantic alone would also take "2023-05-07T00:00:00".
    if isinstance(value, str):
        if not _ISO_DAY.fullmatch(value):
            raise ValueError("must be a calendar day written YYYY-MM-DD")
        return date.fromisoformat(value)
    return value


class _Fact(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    text: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]
    fact_type: Literal["world", "experience"]
    # Optional on read: a model that leaves out "no date" or "no entities" said nothing wrong.
    occurred_on: Annotated[date, BeforeValidator(_iso_day)] | None = None
    entities: list[Annotated[str, StringConstraints(max_length=200)]] = Field(
        default_factory=list, max_length=100
    )


class _Facts(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    facts: list[_Fact]


def _first_problem(exc: PydanticValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    if any(error["type"] == "json_invalid" for error in errors):
        return "content is not valid JSON"
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "(root)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"content is off the schema: {where}: {first['msg']}{more}"


def _user_message(item: ExtractionInput) -> str:
    when = item.event_time
    day = f"{when:%A} {when.day} {when:%B %Y}"
    return (
        f"Event time: {when.isoformat()} ({day})\n"
        f"Event type: {item.event_type.value}\n"
        f"Speaker: {item.speaker or 'not given'}\n"
        f"Content:\n<<<\n{item.text}\n>>>"
    )


class LLMExtractor:
    """FactExtractor over an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        base_url: API root including its version path (``https://api.openai.com/v1``,
            ``http://127.0.0.1:8000/v1``); ``/chat/completions`` is appended.
        model: Model name sent with every request; the extractor's name is ``llm:<model>``.
        api_key: Sent as ``Authorization: Bearer``; never logged nor shown.
        timeout_s: Per-attempt timeout (connect, read, write and pool).
        max_attempts: Attempts in all for one content, retries included (at least 1).
        client: An ``httpx.AsyncClient`` to share; its owner closes it. Without one
            the extractor opens its own and ``close`` releases it.
        backoff_base_s: First backoff ceiling; it doubles per retry (full jitter).
        backoff_max_s: Cap on one backoff and on an honoured ``Retry-After``.

    Raises:
        ExtractionRejected: (from ``extract``) the model's output broke a rule.
        UnavailableError: (from ``extract``) the endpoint stayed down or throttling.
        ConfigurationError: wrong URL, key or model, or an answer that is not a
            chat completion; also bad constructor arguments.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 30.0,
        max_attempts: int = 4,
        client: httpx.AsyncClient | None = None,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 20.0,
    ) -> None:
        if max_attempts < 1 or timeout_s <= 0 or backoff_base_s < 0 or backoff_max_s < 0:
            raise ConfigurationError(
                "max_attempts must be >= 1, timeout_s > 0 and backoff times >= 0"
            )
        if not model:
            raise ConfigurationError("an LLM extractor needs a model name")
        self._model = model
        self._endpoint = OpenAICompatibleEndpoint(
            f"{base_url.rstrip('/')}/chat/completions",
            what="chat",
            api_key=api_key,
            timeout_s=timeout_s,
            backoff=Backoff(max_attempts, backoff_base_s, backoff_max_s),
            retry_event="extraction_request_retrying",
            client=client,
        )

    @property
    def name(self) -> str:
        """``llm:<model>``."""
        return f"llm:{self._model}"

    @property
    def url(self) -> str:
        """The full chat completions endpoint URL."""
        return self._endpoint.url

    async def extract(self, item: ExtractionInput) -> list[ExtractedFact]:
        """The facts ``item`` states, as validated model output."""
        payload = {
            "model": self._model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": _user_message(item)},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "facts", "strict": True, "schema": FACTS_SCHEMA},
            },
        }
        response = await self._endpoint.post(
            payload,
            refuse=lambda answer: self._refuse(item, answer),
            source_event_id=item.source_event_id,
        )
        return self._parse(response, item)

    async def close(self) -> None:
        """Close the HTTP connection pool, unless it was handed in."""
        await self._endpoint.close()

    def _refuse(self, item: ExtractionInput, answer: ServerAnswer) -> Exception:
        if answer.status == 413 or answer.code in _TOO_LONG_CODES:
            # Only this content is too long for the model; the settings are fine.
            return self._reject(item, f"content too long for the model ({answer.message})")
        return wrong_settings(answer)

    def _parse(self, response: httpx.Response, item: ExtractionInput) -> list[ExtractedFact]:
        try:
            content = reply_content(response)
        except UnusableReply as exc:
            raise self._reject(item, str(exc)) from None
        try:
            parsed = _Facts.model_validate_json(content)
        except PydanticValidationError as exc:
            raise self._reject(item, _first_problem(exc)) from None
        if not parsed.facts:
            raise self._reject(item, "the model returned no facts")
        return [
            ExtractedFact(
                text=fact.text,
                fact_type=FactType(fact.fact_type),
                occurred_on=fact.occurred_on,
                entities=tuple(dict.fromkeys(e.strip() for e in fact.entities if e.strip())),
            )
            for fact in parsed.facts
        ]

    def _reject(self, item: ExtractionInput, rule: str) -> ExtractionRejected:
        rule = self._endpoint.redact(rule)
        _log.warning(
            "extraction_rejected",
            source_event_id=item.source_event_id,
            rule=rule,
            extractor=self.name,
        )
        return ExtractionRejected(item.source_event_id, rule)

    def __repr__(self) -> str:
        return f"LLMExtractor(url={self._endpoint.url!r}, model={self._model!r})"
