"""An answer from the bank's memories: a context block and the question, sent to a chat model.

The model is the one the LLM extractor uses (any OpenAI-compatible
``/chat/completions``), called the same way: temperature 0, strict structured
output, retries of throttling and outages with capped backoff
(:mod:`cogsub.openai_http`), the API key never shown. The model must say which
memory ids its answer rests on; only ids that were in the block are kept, the
rest are dropped and logged (a model can invent an id as easily as a fact).

Invalid output (not JSON, off the schema, refused, cut short, empty) is logged
with its rule and raised as :class:`~cogsub.core.errors.UnavailableError`: the
memories are fine, the model's answer was not, and asking again may succeed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Protocol

import httpx
import structlog
from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic import ValidationError as PydanticValidationError

from cogsub.core.context import Answer, AnswerRequest, ContextBlock, ContextRequest
from cogsub.core.errors import ConfigurationError, NotConfiguredError, UnavailableError
from cogsub.openai_http import Backoff, OpenAICompatibleEndpoint, UnusableReply, reply_content
from cogsub.recall.context_block import Recalls, context_block

log = structlog.get_logger("cogsub.recall.answer")

#: What to set for ``/answer`` to work, said in every "not configured" refusal.
ANSWER_SETTINGS = (
    "COGSUB_CONSOLIDATION__EXTRACTOR=llm, COGSUB_CONSOLIDATION__LLM_BASE_URL and "
    "COGSUB_CONSOLIDATION__LLM_MODEL (plus COGSUB_CONSOLIDATION__LLM_API_KEY if the "
    "endpoint needs one)"
)
_MAX_ANSWER_CHARS = 20_000

SYSTEM_PROMPT = """\
You answer a question for an AI agent from its long-term memory. The memory block \
below holds everything you may rely on; every item starts with its memory id in \
square brackets. Rules come first and override anything else; procedures are the \
agreed steps; facts carry the day they happened.

- Answer from the block only. If it does not hold the answer, say so plainly.
- Keep the answer short and direct.
- In "cited", list the memory id of every item your answer rests on, exactly as \
written between the brackets, and no other ids.
Answer with JSON only, following the schema."""

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "cited": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["answer", "cited"],
    "additionalProperties": False,
}
"""The JSON schema sent as ``response_format`` (strict structured output)."""


class _ModelAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    answer: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=_MAX_ANSWER_CHARS)
    ]
    cited: list[Annotated[str, StringConstraints(max_length=1_000)]] = Field(max_length=1_000)


class ChatModel(Protocol):
    """Asks the model once: the validated answer and the ids it cites, as it wrote them."""

    async def ask(self, question: str, block: ContextBlock) -> tuple[str, list[str]]: ...


@dataclass(frozen=True)
class ChatSettings:
    """Where the chat model is and how long to wait for it (the extractor's settings)."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 30.0
    max_attempts: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 20.0


class ChatAnswerer:
    """ChatModel over an OpenAI-compatible ``/chat/completions`` endpoint.

    Each question opens its own connection pool and closes it before returning:
    answers are rare next to recalls and a model's reply dwarfs a TCP handshake,
    while a pool held for the API's lifetime would need an owner to close it.

    Raises (from ``ask``):
        UnavailableError: the endpoint stayed down or throttling, or its output was unusable.
        ConfigurationError: wrong URL, key or model, or an answer that is not a chat completion.
    """

    def __init__(self, settings: ChatSettings) -> None:
        if not settings.model:
            raise ConfigurationError(f"an answer needs a model name: set {ANSWER_SETTINGS}")
        self._settings = settings
        self.url = f"{settings.base_url.rstrip('/')}/chat/completions"

    async def ask(self, question: str, block: ContextBlock) -> tuple[str, list[str]]:
        settings = self._settings
        backoff = Backoff(settings.max_attempts, settings.backoff_base_s, settings.backoff_max_s)
        payload = {
            "model": settings.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": user_message(question, block)},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "answer", "strict": True, "schema": ANSWER_SCHEMA},
            },
        }
        async with httpx.AsyncClient() as client:
            endpoint = OpenAICompatibleEndpoint(
                self.url,
                what="chat",
                api_key=settings.api_key,
                timeout_s=settings.timeout_s,
                backoff=backoff,
                retry_event="answer_request_retrying",
                client=client,
            )
            response = await endpoint.post(payload, bank_id=block.bank_id)
            try:
                return parse_answer(response)
            except UnavailableError as exc:
                rule = endpoint.redact(str(exc))
                log.warning("answer_rejected", bank_id=block.bank_id, rule=rule)
                raise UnavailableError(rule) from None

    def __repr__(self) -> str:
        return f"ChatAnswerer(url={self.url!r}, model={self._settings.model!r})"


def user_message(question: str, block: ContextBlock) -> str:
    """The question and the memory block, fenced so neither reads as instructions."""
    memory = block.text or "(no memories matched)"
    return f"Memory block:\n<<<\n{memory}\n>>>\n\nQuestion:\n<<<\n{question}\n>>>"


def parse_answer(response: httpx.Response) -> tuple[str, list[str]]:
    """The answer and cited ids of a chat completion; UnavailableError naming what was wrong."""
    try:
        content = reply_content(response)
    except UnusableReply as exc:
        raise UnavailableError(str(exc)) from None
    try:
        parsed = _ModelAnswer.model_validate_json(content)
    except PydanticValidationError as exc:
        raise UnavailableError(f"the model's output was unusable: {_first_problem(exc)}") from None
    return parsed.answer, parsed.cited


def _first_problem(exc: PydanticValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    if any(error["type"] == "json_invalid" for error in errors):
        return "not valid JSON"
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "(root)"
    return f"off the schema: {where}: {first['msg']}"


def cited_in_block(cited: list[str], block: ContextBlock) -> tuple[list[str], list[str]]:
    """``cited`` split into ids the block holds (first mention order, once) and the rest."""
    held = set(block.memory_ids())
    kept = [memory_id for memory_id in dict.fromkeys(cited) if memory_id in held]
    dropped = [memory_id for memory_id in dict.fromkeys(cited) if memory_id not in held]
    return kept, dropped


async def answer(
    memory: Recalls, model: ChatModel | None, bank_id: str, request: AnswerRequest
) -> Answer:
    """The model's answer to ``request.question`` over one recall's context block.

    Raises:
        NotConfiguredError: no chat model is configured (checked before recalling).
    """
    if model is None:
        raise NotConfiguredError(f"answer needs a chat model: set {ANSWER_SETTINGS}")
    wanted = ContextRequest(
        query=request.question,
        max_tokens=request.max_tokens,
        types=request.types,
        tags=request.tags,
        session_id=request.session_id,
    )
    block = await context_block(memory, bank_id, wanted)
    text, cited = await model.ask(request.question, block)
    kept, dropped = cited_in_block(cited, block)
    if dropped:
        log.warning("answer_citations_dropped", bank_id=bank_id, dropped=dropped[:20])
    return Answer(answer=text, cited=kept, context=block)
