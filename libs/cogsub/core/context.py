"""The context block and the answer at the API boundary (issue 29).

A context block is one recall laid out the way an agent acts on it: rules,
procedures, profile, facts, reasoning, each line carrying its memory id, the
whole within a token budget. An answer is a chat model's reply to a question
over such a block, with the memory ids it cites. These models are shared by the
HTTP API, the SDK, the CLI and the MCP server (one source of truth).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from cogsub.core.events import MAX_TAGS, FactType, ShortText, Tag
from cogsub.core.memory import MAX_QUERY_LENGTH, BoundaryModel

DEFAULT_CONTEXT_TOKENS = 1_000
DEFAULT_ANSWER_TOKENS = 2_000
MAX_CONTEXT_TOKENS = 100_000


class ContextFormat(StrEnum):
    """How the block is handed back: prompt-ready markdown, or the sections alone."""

    MARKDOWN = "markdown"
    JSON = "json"


class SectionName(StrEnum):
    """The block's sections, in the order an agent acts on them."""

    RULES = "rules"
    PROCEDURES = "procedures"
    PROFILE = "profile"
    FACTS = "facts"
    REASONING = "reasoning"


class ContextRequest(BoundaryModel):
    """What to recall for a context block, and how much of it fits the prompt."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_LENGTH)
    max_tokens: int = Field(
        default=DEFAULT_CONTEXT_TOKENS,
        ge=1,
        le=MAX_CONTEXT_TOKENS,
        description="the whole block's budget, counted as recall counts tokens",
    )
    types: list[FactType] | None = Field(default=None, description="null: every type")
    format: ContextFormat = ContextFormat.MARKDOWN
    tags: list[Tag] | None = Field(default=None, max_length=MAX_TAGS)
    session_id: ShortText | None = Field(default=None, description="for session-relative novelty")
    reinforce: bool = Field(
        default=True,
        description="count this retrieval toward reinforcement (off for probes and previews)",
    )


class ContextItem(BoundaryModel):
    """One memory in the block."""

    memory_id: str
    type: FactType | None
    text: str
    timestamp: str
    version: int | None = Field(default=None, description="a procedure's version, else null")
    score: float


class ContextSection(BoundaryModel):
    """The block's memories of one kind, best first."""

    name: SectionName
    items: list[ContextItem]


class ContextBlock(BoundaryModel):
    """One recall laid out for a prompt; ``text`` is "" when ``format`` is json."""

    bank_id: str
    query: str
    format: ContextFormat
    tokens: int = Field(ge=0, description="tokens of the markdown block (what max_tokens bounds)")
    max_tokens: int
    text: str
    sections: list[ContextSection]

    def memory_ids(self) -> list[str]:
        """Every memory id in the block, in layout order."""
        return [item.memory_id for section in self.sections for item in section.items]


class AnswerRequest(BoundaryModel):
    """A question answered from the bank's memories by the configured chat model."""

    question: str = Field(min_length=1, max_length=MAX_QUERY_LENGTH)
    max_tokens: int = Field(
        default=DEFAULT_ANSWER_TOKENS,
        ge=1,
        le=MAX_CONTEXT_TOKENS,
        description="the context block's budget",
    )
    types: list[FactType] | None = Field(default=None, description="null: every type")
    tags: list[Tag] | None = Field(default=None, max_length=MAX_TAGS)
    session_id: ShortText | None = Field(default=None, description="for session-relative novelty")


class Answer(BoundaryModel):
    """The model's answer, the ids it cites (only ids in the block), and the block."""

    answer: str
    cited: list[str]
    context: ContextBlock
