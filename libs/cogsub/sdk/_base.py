"""Request building, validation and response parsing shared by both clients (no I/O).

Every public method of ``MemoryClient`` and ``AsyncMemoryClient`` asks this base
for a ``Call`` (method, path, JSON body and how to read the answer), sends it
with its own httpx client, and hands the answer back to ``Call.parse``.
Arguments are validated here with the same pydantic models the server uses,
so a bad argument fails before anything is sent, with the server's field
names and rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from cogsub.core.context import Answer, AnswerRequest, ContextBlock, ContextRequest
from cogsub.core.errors import FieldProblem, InvalidInputError
from cogsub.core.events import FactType, checked_safe_id
from cogsub.core.history import MemoryHistory, MemoryUpdate
from cogsub.core.lifecycle import ForgetBankReport, ForgetReport, ImportReport, LineProblem
from cogsub.core.listing import MAX_BANK_PAGE_LIMIT, BankPage, MemoryListFilters, MemoryPage
from cogsub.core.memory import (
    ConsolidationReport,
    FeedbackRequest,
    FeedbackResult,
    MemoryRecord,
    RecallRequest,
    RecallResponse,
    RetainContext,
    RetainRequest,
    RetainResult,
)
from cogsub.core.text_blocks import TEXT_BLOCKS, TextBlockKind
from cogsub.sdk._errors import error_for

M = TypeVar("M", bound=BaseModel)

DEFAULT_TIMEOUT_S = 30.0
USER_AGENT = "cogsub-sdk/0.1"
ACTOR_HEADER = "X-Cogsub-Actor"
JSON_LINES = "application/x-ndjson"
ContextArg = RetainContext | Mapping[str, str | None] | None
TimeArg = datetime | str | None
LinesArg = str | bytes | Iterable[str | bytes]


# The SDK's names for the API's answers: the very models the server answers with.
ForgetResult = ForgetReport
ForgetBankResult = ForgetBankReport
ImportResult = ImportReport
ImportProblem = LineProblem


@dataclass(frozen=True)
class Call(Generic[M]):
    """One request to send and the model its successful answer is read into."""

    method: str
    path: str
    json: dict[str, Any] | None
    result: type[M]
    params: Mapping[str, str | Sequence[str]] | None = None
    content: bytes | None = None
    headers: Mapping[str, str] | None = None

    def parse(self, response: httpx.Response) -> M:
        """The answer as ``result``, or the domain error the server reported."""
        if response.status_code >= 400:
            raise error_for(response.status_code, response.content)
        try:
            return self.result.model_validate_json(response.content)
        except ValidationError as exc:
            raise InvalidInputError(_problems(exc, prefix="(response)")) from exc


def _problems(exc: ValidationError, *, prefix: str = "") -> list[FieldProblem]:
    problems = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"]) or "(body)"
        problems.append(FieldProblem(f"{prefix}.{field}" if prefix else field, error["msg"]))
    return problems


def _validated(model: type[M], fields: Mapping[str, Any]) -> M:
    try:
        return model.model_validate(dict(fields))
    except ValidationError as exc:
        raise InvalidInputError(_problems(exc)) from None


def _segment(name: str, value: str) -> str:
    """``value`` checked as a safe id and percent-encoded for one URL path segment."""
    return quote(checked_safe_id(name, value), safe="")


def _bank_path(bank_id: str, *rest: str) -> str:
    return "/".join(["/v1/banks", _segment("bank_id", bank_id), *rest])


def _context(context: ContextArg) -> dict[str, Any]:
    if context is None:
        return {}
    if isinstance(context, RetainContext):
        return context.model_dump(exclude_none=True)
    return dict(context)


def _type_list(types: Iterable[FactType | str] | None) -> list[FactType | str] | None:
    if isinstance(types, str):  # types="procedure" means one type, not its letters
        return [types]
    return list(types) if types is not None else None


def _tag_params(tags: Sequence[str]) -> list[str]:
    """One ``tags`` parameter per tag: repeated ones are taken verbatim, a lone one is
    comma-separated, so a lone tag holding a comma or edge spaces is sent twice."""
    if len(tags) == 1 and ("," in tags[0] or tags[0] != tags[0].strip()):
        return [tags[0], tags[0]]
    return list(tags)


def _wire(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_none=True)


class _BaseClient:
    """Configuration and the I/O-free half of every call."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        actor: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._api_key = api_key
        self._actor = actor

    @property
    def has_api_key(self) -> bool:
        """Whether calls carry an API key (never the key itself)."""
        return self._api_key is not None

    def __repr__(self) -> str:
        # Never the key: a repr ends up in logs and tracebacks.
        return f"{type(self).__name__}({self.base_url!r})"

    def _headers(self) -> dict[str, str]:
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key}"
        if self._actor is not None:
            headers[ACTOR_HEADER] = self._actor
        return headers

    def _retain_call(
        self,
        bank_id: str,
        content: str,
        fact_type: FactType | str | None,
        tags: Sequence[str] | None,
        timestamp: TimeArg,
        context: ContextArg,
        *,
        memory_id: str | None,
        wait: bool,
    ) -> Call[RetainResult]:
        path = _bank_path(bank_id, "memories")
        request = _validated(
            RetainRequest,
            {
                "content": content,
                "fact_type": fact_type,
                "tags": list(tags or []),
                "timestamp": timestamp,
                "context": _context(context),
                "memory_id": memory_id,
                "wait": wait,
            },
        )
        return Call("POST", path, _wire(request), RetainResult)

    def _procedure_call(
        self,
        bank_id: str,
        steps: Sequence[str],
        rationale: str | None,
        *,
        supersedes: str | None,
        tags: Sequence[str] | None,
        memory_id: str | None,
        wait: bool,
    ) -> Call[RetainResult]:
        path = _bank_path(bank_id, "procedures")
        if isinstance(steps, str):  # a lone string would become one step per character
            raise InvalidInputError([FieldProblem("steps", "must be a list of strings")])
        if not steps:
            raise InvalidInputError([FieldProblem("steps", "must have at least one step")])
        # The server composes the stored text; validating with a stand-in checks every other rule.
        _validated(
            RetainRequest,
            {
                "content": "procedure",
                "fact_type": FactType.PROCEDURE,
                "steps": list(steps),
                "rationale": rationale,
                "supersedes": supersedes,
                "tags": list(tags or []),
                "memory_id": memory_id,
            },
        )
        body: dict[str, Any] = {"steps": list(steps), "tags": list(tags or []), "wait": wait}
        optional = {"rationale": rationale, "supersedes": supersedes, "memory_id": memory_id}
        body |= {name: value for name, value in optional.items() if value is not None}
        return Call("POST", path, body, RetainResult)

    def _text_block_call(
        self,
        kind: TextBlockKind,
        bank_id: str,
        text: str,
        *,
        tags: Sequence[str] | None,
        memory_id: str | None,
        wait: bool,
    ) -> Call[RetainResult]:
        block = TEXT_BLOCKS[kind]
        path = _bank_path(bank_id, block.resource)
        request = _validated(
            RetainRequest,
            {
                "content": text,
                "fact_type": block.fact_type,
                "tags": list(tags or []),
                "memory_id": memory_id,
            },
        )
        body: dict[str, Any] = {"text": request.content, "tags": request.tags, "wait": wait}
        if memory_id is not None:
            body["memory_id"] = memory_id
        return Call(block.method, path, body, RetainResult)

    def _recall_call(
        self,
        bank_id: str,
        query: str,
        types: Iterable[FactType | str] | None,
        k: int,
        max_tokens: int | None,
        *,
        tags: Sequence[str] | None,
        since: TimeArg,
        until: TimeArg,
        prefer_observations: bool,
        session_id: str | None,
        all_versions: bool,
    ) -> Call[RecallResponse]:
        path = _bank_path(bank_id, "recall")
        if isinstance(types, str):  # recall(..., types="procedure") means one type, not letters
            types = [types]
        request = _validated(
            RecallRequest,
            {
                "query": query,
                "types": list(types) if types is not None else None,
                "k": k,
                "max_tokens": max_tokens,
                "tags": list(tags) if tags is not None else None,
                "since": since,
                "until": until,
                "prefer_observations": prefer_observations,
                "session_id": session_id,
                "all_versions": all_versions,
            },
        )
        return Call("POST", path, _wire(request), RecallResponse)

    def _context_call(
        self,
        bank_id: str,
        query: str,
        max_tokens: int,
        types: Iterable[FactType | str] | None,
        *,
        format: str,
        tags: Sequence[str] | None,
        session_id: str | None,
    ) -> Call[ContextBlock]:
        fields = {
            "query": query,
            "max_tokens": max_tokens,
            "types": _type_list(types),
            "format": format,
            "tags": list(tags) if tags is not None else None,
            "session_id": session_id,
        }
        request = _validated(ContextRequest, fields)
        return Call("POST", _bank_path(bank_id, "context"), _wire(request), ContextBlock)

    def _answer_call(
        self,
        bank_id: str,
        question: str,
        max_tokens: int,
        types: Iterable[FactType | str] | None,
        *,
        tags: Sequence[str] | None,
        session_id: str | None,
    ) -> Call[Answer]:
        fields = {
            "question": question,
            "max_tokens": max_tokens,
            "types": _type_list(types),
            "tags": list(tags) if tags is not None else None,
            "session_id": session_id,
        }
        request = _validated(AnswerRequest, fields)
        return Call("POST", _bank_path(bank_id, "answer"), _wire(request), Answer)

    def _consolidate_call(self, bank_id: str) -> Call[ConsolidationReport]:
        return Call("POST", _bank_path(bank_id, "consolidate"), None, ConsolidationReport)

    def _feedback_call(
        self, bank_id: str, memory_ids: Sequence[str], signal: str
    ) -> Call[FeedbackResult]:
        request = _validated(FeedbackRequest, {"memory_ids": list(memory_ids), "signal": signal})
        return Call("POST", _bank_path(bank_id, "feedback"), _wire(request), FeedbackResult)

    def _get_memory_call(self, bank_id: str, memory_id: str) -> Call[MemoryRecord]:
        path = _bank_path(bank_id, "memories", _segment("memory_id", memory_id))
        return Call("GET", path, None, MemoryRecord)

    def _list_banks_call(self, cursor: str | None, limit: int) -> Call[BankPage]:
        if not 1 <= limit <= MAX_BANK_PAGE_LIMIT:
            rule = f"must be between 1 and {MAX_BANK_PAGE_LIMIT}"
            raise InvalidInputError([FieldProblem("limit", rule)])
        params = {"limit": str(limit), **({"cursor": cursor} if cursor else {})}
        return Call("GET", "/v1/banks", None, BankPage, params=params)

    def _list_memories_call(
        self,
        bank_id: str,
        types: Iterable[FactType | str] | None,
        tags: Sequence[str] | None,
        since: TimeArg,
        until: TimeArg,
        *,
        include_superseded: bool,
        cursor: str | None,
        limit: int,
    ) -> Call[MemoryPage]:
        fields = {
            "types": _type_list(types),
            "tags": list(tags) if tags is not None else None,
            "since": since,
            "until": until,
            "include_superseded": include_superseded,
            "cursor": cursor,
            "limit": limit,
        }
        ask = _validated(MemoryListFilters, fields)
        params: dict[str, str | Sequence[str]] = {
            "limit": str(ask.limit),
            "include_superseded": "true" if ask.include_superseded else "false",
        }
        if ask.types is not None:
            params["types"] = ",".join(fact.value for fact in ask.types)
        if ask.tags is not None:
            params["tags"] = _tag_params(ask.tags)
        for name, moment in (("since", ask.since), ("until", ask.until)):
            if moment is not None:
                params[name] = moment.isoformat()
        if ask.cursor is not None:
            params["cursor"] = ask.cursor
        path = _bank_path(bank_id, "memories")
        return Call("GET", path, None, MemoryPage, params=params)

    def _history_call(self, bank_id: str, memory_id: str) -> Call[MemoryHistory]:
        path = _bank_path(bank_id, "memories", _segment("memory_id", memory_id), "history")
        return Call("GET", path, None, MemoryHistory)

    def _update_call(
        self, bank_id: str, memory_id: str, fields: Mapping[str, Any]
    ) -> Call[RetainResult]:
        path = _bank_path(bank_id, "memories", _segment("memory_id", memory_id))
        update = _validated(MemoryUpdate, fields)
        return Call("PUT", path, _wire(update), RetainResult)

    def _forget_call(self, bank_id: str, memory_id: str) -> Call[ForgetResult]:
        path = _bank_path(bank_id, "memories", _segment("memory_id", memory_id))
        return Call("DELETE", path, None, ForgetResult)

    def _forget_bank_call(self, bank_id: str, confirm: str) -> Call[ForgetBankResult]:
        path = _bank_path(bank_id)
        if confirm != bank_id:
            raise InvalidInputError(
                [FieldProblem("confirm", f"must be the bank id {bank_id!r} to forget the bank")]
            )
        return Call("DELETE", path, None, ForgetBankResult, params={"confirm": confirm})

    def _export_path(self, bank_id: str) -> str:
        return _bank_path(bank_id, "export")

    def _import_call(self, bank_id: str, lines: LinesArg) -> Call[ImportResult]:
        path = _bank_path(bank_id, "import")
        if isinstance(lines, str):
            body = lines.encode()
        elif isinstance(lines, bytes):
            body = lines
        else:
            body = b"\n".join(
                line.rstrip(b"\r\n") if isinstance(line, bytes) else line.rstrip("\r\n").encode()
                for line in lines
            )
        headers = {"Content-Type": JSON_LINES}
        return Call("POST", path, None, ImportResult, content=body, headers=headers)


# What both clients accept and how an embedded client addresses its in-process stack.
EmbedderKind = Literal["minilm", "hash"]
FeedbackSignalArg = Literal["returned", "used", "helpful"]
ContextFormatArg = Literal["markdown", "json"]
EMBEDDED_URL = "http://embedded.cogsub"
EMBEDDED_ACTOR = "sdk-embedded"


def update_fields(
    content: str | None,
    steps: Sequence[str] | None,
    rationale: str | None,
    tags: Sequence[str] | None,
    timestamp: TimeArg,
    new_memory_id: str | None,
    wait: bool,
) -> dict[str, object]:
    """The ``MemoryUpdate`` fields of an ``update`` call (its ``memory_id`` is the new one's)."""
    return {
        "content": content,
        "steps": list(steps) if steps is not None else None,
        "rationale": rationale,
        "tags": list(tags) if tags is not None else None,
        "timestamp": timestamp,
        "memory_id": new_memory_id,
        "wait": wait,
    }
