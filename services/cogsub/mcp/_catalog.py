"""The MCP tool set: names, when-to-use descriptions, argument models and calls (no I/O here).

Every tool's arguments are the API's own body model (or the fields of it the SDK
takes), so a tool, the HTTP route and the SDK method check the same rules.
Unless the server is pinned to one bank, each bank tool also takes ``bank_id``.
A tool runs by calling one method of ``AsyncMemoryClient``, so stdio and HTTP
share every call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from cogsub.core.errors import FieldProblem, InvalidInputError
from cogsub.core.events import SAFE_ID, SafeId, checked_safe_id
from cogsub.core.listing import MAX_BANK_PAGE_LIMIT, MAX_CURSOR_LENGTH
from cogsub.core.memory import BoundaryModel
from cogsub.sdk import AsyncMemoryClient

M = TypeVar("M", bound=BaseModel)
Run = Callable[[AsyncMemoryClient, str, M], Awaitable[BaseModel]]
BANK_FIELD = "bank_id"
BANK_DESCRIPTION = (
    "the memory bank, one per user or agent: a letter, digit or '_' first, then letters, "
    "digits and _ . : @ + - (no '..')"
)


class MemoryRef(BoundaryModel):
    """One memory of the bank, by id (a path segment in the API, so no body model there)."""

    memory_id: SafeId = Field(description="the memory's id, as retain or recall returned it")


class NoArguments(BoundaryModel):
    """A tool that needs nothing but the bank."""


class BankListing(BoundaryModel):
    """One page of the banks the caller's key grants (the query of ``GET /v1/banks``)."""

    cursor: str | None = Field(
        default=None,
        max_length=MAX_CURSOR_LENGTH,
        description="next_cursor of the previous page; leave out for the first",
    )
    limit: int = Field(default=100, ge=1, le=MAX_BANK_PAGE_LIMIT)


def fields_of(model: type[BaseModel], names: Iterable[str], title: str) -> type[BaseModel]:
    """A model of some of ``model``'s fields, each with its own type, default and rules."""
    picked = {
        name: (model.model_fields[name].annotation, model.model_fields[name]) for name in names
    }
    config = ConfigDict(extra="forbid", frozen=True, title=title)
    built: type[BaseModel] = create_model(title, __config__=config, **picked)  # type: ignore[call-overload]
    return built


@dataclass(frozen=True)
class ToolSpec(Generic[M]):
    """One tool: what it is for, what it takes (``arguments``), and the SDK call it makes.

    ``request`` is the API model the validated arguments are read into; ``arguments``
    is the model the tool shows (``request`` itself, or some of its fields).
    ``bank_wide`` tools span banks and are offered only by a server not pinned to one.
    """

    name: str
    description: str
    request: type[M]
    run: Run[M]
    arguments: type[BaseModel] | None = None
    bank_wide: bool = False

    @property
    def shown(self) -> type[BaseModel]:
        return self.arguments or self.request


@dataclass(frozen=True)
class ToolCall(Generic[M]):
    """A tool call whose arguments passed every rule: the bank and the API request."""

    spec: ToolSpec[M]
    bank_id: str
    request: M

    async def run(self, client: AsyncMemoryClient) -> BaseModel:
        return await self.spec.run(client, self.bank_id, self.request)


def input_schema(spec: ToolSpec[Any], *, pinned_bank: str | None) -> dict[str, Any]:
    """The JSON schema of the tool's arguments; ``bank_id`` is required unless pinned."""
    schema = spec.shown.model_json_schema()
    schema.pop("title", None)
    if spec.bank_wide or pinned_bank is not None:
        return schema
    bank = SAFE_ID.json_schema()
    bank["description"] = BANK_DESCRIPTION
    schema["properties"] = {BANK_FIELD: bank, **schema.get("properties", {})}
    schema["required"] = [BANK_FIELD, *schema.get("required", [])]
    return schema


def parse_call(
    spec: ToolSpec[M], arguments: Mapping[str, Any] | None, *, pinned_bank: str | None
) -> ToolCall[M]:
    """The call ``arguments`` stand for, or InvalidInputError naming each broken field."""
    given = dict(arguments or {})
    problems: list[FieldProblem] = []
    bank = _bank_of(spec, given, pinned_bank, problems)
    shown: BaseModel | None = None
    try:
        shown = spec.shown.model_validate(given)
    except ValidationError as exc:
        problems.extend(_problems(exc))
    if problems or shown is None:
        raise InvalidInputError(problems)
    request = spec.request.model_validate(shown.model_dump(exclude_unset=True))
    return ToolCall(spec, bank, request)


def _bank_of(
    spec: ToolSpec[Any],
    given: dict[str, Any],
    pinned_bank: str | None,
    problems: list[FieldProblem],
) -> str:
    if spec.bank_wide:
        return ""
    sent = given.pop(BANK_FIELD, None)
    if pinned_bank is not None:
        if sent is not None and sent != pinned_bank:
            rule = f"this server is pinned to bank {pinned_bank!r}; leave bank_id out"
            problems.append(FieldProblem(BANK_FIELD, rule))
        return pinned_bank
    if sent is None:
        problems.append(FieldProblem(BANK_FIELD, "Field required"))
        return ""
    try:
        return checked_safe_id(BANK_FIELD, sent)
    except InvalidInputError as exc:
        problems.extend(exc.problems)
        return ""


def _problems(exc: ValidationError) -> list[FieldProblem]:
    return [
        FieldProblem(".".join(str(part) for part in error["loc"]) or "(arguments)", error["msg"])
        for error in exc.errors(include_url=False)
    ]


class Callers(Protocol):
    """Who is calling: the bank the server is pinned to, and a client acting for the caller."""

    def pinned_bank(self, request: Any | None) -> str | None:
        """The bank every tool uses, or None when each call names its ``bank_id``."""
        ...

    def several_banks(self, request: Any | None) -> bool:
        """Whether the caller may use more than one bank (``list_banks`` is offered then)."""
        ...

    def client(self, request: Any | None) -> AbstractAsyncContextManager[AsyncMemoryClient]:
        """A client calling the API as this caller, for one tool call."""
        ...
