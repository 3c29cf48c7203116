"""The experience event: the atomic unit everything else is derived from.

Field names on the wire are camelCase exactly as in the experience-capture
seed; Python attributes are snake_case. Every bound here exists because the
value ends up in an object key, an index document or a log line.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationError,
    field_serializer,
)
from pydantic.alias_generators import to_camel

from cogsub.core.errors import FieldProblem, InvalidEventError, InvalidInputError

MAX_ID_LENGTH = 128
MAX_TEXT_LENGTH = 32_768
MAX_SHORT_TEXT_LENGTH = 4_096
MAX_TAGS = 64
MAX_TAG_LENGTH = 64
MAX_EMBEDDING_DIMENSION = 4_096
MAX_EVENT_BYTES = 1_048_576

#: The bank of an event that names none (the seed's events name none).
DEFAULT_BANK = "default"

_SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@+-]*")


class EventType(StrEnum):
    """What kind of cognitive step produced the event."""

    USER_INPUT = "user_input"
    TOOL_RESULT = "tool_result"
    SYSTEM_EVENT = "system_event"
    AGENT_ACTION = "agent_action"
    ENVIRONMENTAL_OBSERVATION = "environmental_observation"
    CONSOLIDATION_OUTPUT = "consolidation_output"


class FactType(StrEnum):
    """The eight memory types, in two families (typed-memory seed)."""

    WORLD = "world"
    EXPERIENCE = "experience"
    OBSERVATION = "observation"
    PROCEDURE = "procedure"
    REASONING = "reasoning"
    PREFERENCE = "preference"
    CORRECTION = "correction"
    PROFILE = "profile"


EXTRACTED_FACT_TYPES = frozenset({FactType.WORLD, FactType.EXPERIENCE, FactType.OBSERVATION})
TYPED_BLOCK_FACT_TYPES = frozenset(set(FactType) - EXTRACTED_FACT_TYPES)


def _check_safe_id(value: str) -> str:
    if not _SAFE_ID.fullmatch(value):
        raise ValueError(
            "must start with a letter, digit or '_' and contain only "
            "letters, digits and _ . : @ + -"
        )
    if ".." in value:
        raise ValueError("must not contain '..'")
    return value


SafeId = Annotated[
    str, Field(min_length=1, max_length=MAX_ID_LENGTH), AfterValidator(_check_safe_id)
]
#: ``SafeId`` outside a model: its JSON schema, and the check behind ``checked_safe_id``.
SAFE_ID: TypeAdapter[str] = TypeAdapter(SafeId)


def checked_safe_id(field: str, value: object) -> str:
    """``value`` as a safe id, else InvalidInputError naming ``field`` and each rule it broke."""
    try:
        return SAFE_ID.validate_python(value)
    except ValidationError as exc:
        rules = "; ".join(e["msg"] for e in exc.errors(include_url=False))
        raise InvalidInputError([FieldProblem(field, rules)]) from None


def _require_iso_text(value: object) -> object:
    if not isinstance(value, str):
        raise ValueError(
            "must be an ISO-8601 string with a timezone, e.g. 2026-05-08T22:31:25.237Z"
        )
    return value


def _representable_in_utc(value: datetime) -> datetime:
    # Keys, documents and ranking all work on the UTC instant: year 1 at +05:00 has none.
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise ValueError("must fall between years 1 and 9999 once converted to UTC") from None
    return value


#: An aware datetime that has a UTC instant (what every request timestamp must be).
Instant = Annotated[AwareDatetime, AfterValidator(_representable_in_utc)]
Timestamp = Annotated[Instant, BeforeValidator(_require_iso_text)]
Score = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
ShortText = Annotated[str, Field(max_length=MAX_SHORT_TEXT_LENGTH)]
Tag = Annotated[str, Field(min_length=1, max_length=MAX_TAG_LENGTH)]


class WireModel(BaseModel):
    """camelCase on the wire, snake_case in Python, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict with wire names, omitting absent optional fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_wire_json(self) -> bytes:
        """``to_wire`` as compact UTF-8 JSON, serialised in one pass."""
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()


class EventContext(WireModel):
    session_id: ShortText | None = None
    trace_id: ShortText | None = None
    span_id: ShortText | None = None
    user_id: ShortText | None = None
    agent_id: ShortText | None = None
    goal_id: ShortText | None = None
    policy_version: ShortText | None = None


class EventInput(WireModel):
    text: str = Field(max_length=MAX_TEXT_LENGTH)
    embedding: list[Annotated[float, Field(allow_inf_nan=False)]] = Field(
        default_factory=list, max_length=MAX_EMBEDDING_DIMENSION
    )
    structured: JsonValue = None


class InternalState(WireModel):
    confidence: Score | None = None
    active_plan: ShortText | None = None
    working_memory_snapshot: JsonValue = None


class EventAction(WireModel):
    tool: ShortText | None = None
    parameters: JsonValue = None
    reasoning: str | None = Field(default=None, max_length=MAX_TEXT_LENGTH)


class EventResult(WireModel):
    output: JsonValue = None
    success: bool | None = None
    latency_ms: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    error_code: ShortText | None = None


class EventEvaluation(WireModel):
    reward_score: Score | None = None
    self_assessed_quality: Score | None = None
    user_feedback: ShortText | None = None


def format_timestamp(value: datetime) -> str:
    """UTC ISO-8601 with a ``Z``; milliseconds when that loses nothing."""
    utc = value.astimezone(UTC)
    micro = utc.microsecond
    fraction = f"{micro // 1000:03d}" if micro % 1000 == 0 else f"{micro:06d}"
    # The year by hand: strftime's %Y does not zero-pad years before 1000 on every libc.
    return f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S}.{fraction}Z"


class ExperienceEvent(WireModel):
    """One experience: input, internal state, action, result and evaluation."""

    event_id: SafeId
    timestamp: Timestamp
    type: EventType
    context: EventContext = Field(default_factory=EventContext)
    input: EventInput
    internal_state: InternalState | None = None
    action: EventAction | None = None
    result: EventResult | None = None
    evaluation: EventEvaluation | None = None
    importance_score: Score = 0.0
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    bank_id: SafeId = DEFAULT_BANK
    fact_type: FactType | None = None

    @field_serializer("timestamp")
    def _serialize_timestamp(self, value: datetime) -> str:
        return format_timestamp(value)


class ArchivedEvent(ExperienceEvent):
    """The full event as written once to the archive (truth layer)."""

    object_storage_key: str


def _wire_path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item.startswith(("function-", "constrained-")) or item in {"str", "int", "float"}:
            continue  # pydantic's internal validator names say nothing to a producer
        else:
            parts.append(("." if parts else "") + to_camel(item))
    return "".join(parts) or "(event)"


def problems_from(error: ValidationError) -> list[FieldProblem]:
    """Turn a pydantic error into ``field: rule`` problems with wire names."""
    problems = []
    for detail in error.errors(include_url=False):
        rule = detail["msg"].removeprefix("Value error, ")
        if detail["type"] == "extra_forbidden":
            rule = "is not a field of this schema"
        problems.append(FieldProblem(_wire_path(tuple(detail["loc"])), rule))
    return problems


def parse_event(raw: bytes | str) -> ExperienceEvent:
    """Parse and validate one event from JSON, raising InvalidEventError."""
    size = len(raw.encode() if isinstance(raw, str) else raw)
    if size > MAX_EVENT_BYTES:
        raise InvalidEventError(
            [FieldProblem("(event)", f"must be at most {MAX_EVENT_BYTES} bytes")]
        )
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidEventError([FieldProblem("(event)", f"must be JSON: {exc}")]) from None
    return validate_event(data)


def validate_event(data: object) -> ExperienceEvent:
    """Validate an already-decoded JSON value as an ExperienceEvent."""
    if not isinstance(data, dict):
        raise InvalidEventError([FieldProblem("(event)", "must be a JSON object")])
    try:
        return ExperienceEvent.model_validate(data)
    except ValidationError as exc:
        raise InvalidEventError(problems_from(exc)) from None
