"""The tools an MCP host sees, each described by when an agent should use it.

The descriptions follow the eight memory types of the typed-memory seed: a
correction the moment the user says "no, do it this way", a procedure after a
task went right, a preference for a conditional rule, and so on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from cogsub.api.memories import ProcedureBody, TextBlockBody
from cogsub.core.context import AnswerRequest, ContextFormat, ContextRequest
from cogsub.core.memory import RecallRequest, RetainRequest
from cogsub.mcp._catalog import BankListing, MemoryRef, NoArguments, ToolSpec, fields_of
from cogsub.sdk import AsyncMemoryClient

_BLOCK_FIELDS = ("text", "tags", "memory_id", "wait")


async def _retain(client: AsyncMemoryClient, bank: str, r: RetainRequest) -> BaseModel:
    return await client.retain(
        bank,
        r.content,
        r.fact_type,
        r.tags,
        r.timestamp,
        r.context,
        memory_id=r.memory_id,
        wait=r.wait,
    )


async def _procedure(client: AsyncMemoryClient, bank: str, r: ProcedureBody) -> BaseModel:
    return await client.retain_procedure(
        bank,
        r.steps,
        r.rationale,
        supersedes=r.supersedes,
        tags=r.tags,
        memory_id=r.memory_id,
        wait=r.wait,
    )


async def _reasoning(client: AsyncMemoryClient, bank: str, r: TextBlockBody) -> BaseModel:
    return await client.retain_reasoning(
        bank, r.text, tags=r.tags, memory_id=r.memory_id, wait=r.wait
    )


async def _preference(client: AsyncMemoryClient, bank: str, r: TextBlockBody) -> BaseModel:
    return await client.retain_preference(
        bank, r.text, tags=r.tags, memory_id=r.memory_id, wait=r.wait
    )


async def _correction(client: AsyncMemoryClient, bank: str, r: TextBlockBody) -> BaseModel:
    return await client.retain_correction(
        bank, r.text, tags=r.tags, memory_id=r.memory_id, wait=r.wait
    )


async def _profile(client: AsyncMemoryClient, bank: str, r: TextBlockBody) -> BaseModel:
    return await client.update_profile(
        bank, r.text, tags=r.tags, memory_id=r.memory_id, wait=r.wait
    )


async def _recall(client: AsyncMemoryClient, bank: str, r: RecallRequest) -> BaseModel:
    return await client.recall(
        bank,
        r.query,
        r.types,
        r.k,
        r.max_tokens,
        tags=r.tags,
        since=r.since,
        until=r.until,
        prefer_observations=r.prefer_observations,
        session_id=r.session_id,
        all_versions=r.all_versions,
    )


async def _context(client: AsyncMemoryClient, bank: str, r: ContextRequest) -> BaseModel:
    return await client.context(
        bank,
        r.query,
        max_tokens=r.max_tokens,
        types=r.types,
        format="json" if r.format == ContextFormat.JSON else "markdown",
        tags=r.tags,
        session_id=r.session_id,
    )


async def _answer(client: AsyncMemoryClient, bank: str, r: AnswerRequest) -> BaseModel:
    return await client.answer(
        bank, r.question, r.max_tokens, r.types, tags=r.tags, session_id=r.session_id
    )


async def _get(client: AsyncMemoryClient, bank: str, r: MemoryRef) -> BaseModel:
    return await client.get_memory(bank, r.memory_id)


async def _forget(client: AsyncMemoryClient, bank: str, r: MemoryRef) -> BaseModel:
    return await client.forget(bank, r.memory_id)


async def _consolidate(client: AsyncMemoryClient, bank: str, _: NoArguments) -> BaseModel:
    return await client.consolidate(bank)


async def _list_banks(client: AsyncMemoryClient, _: str, r: BankListing) -> BaseModel:
    return await client.list_banks(cursor=r.cursor, limit=r.limit)


def _block(name: str) -> type[BaseModel]:
    return fields_of(TextBlockBody, _BLOCK_FIELDS, name)


TOOLS: tuple[ToolSpec[Any], ...] = (
    ToolSpec(
        "retain",
        "Keep a memory of plain content. Use it for facts about the user and their world "
        "(fact_type world: 'Jane owns the billing service'), for what you yourself did "
        "(experience), or leave fact_type out to keep raw experience the engine extracts "
        "facts from. For how-to, why, rules, corrections and the profile use the retain_* "
        "and update_profile tools instead.",
        RetainRequest,
        _retain,
        fields_of(
            RetainRequest,
            ("content", "fact_type", "tags", "timestamp", "context", "memory_id", "wait"),
            "RetainArguments",
        ),
    ),
    ToolSpec(
        "retain_procedure",
        "Keep how a task was actually done, right after it went well: the distilled steps "
        "and why (e.g. make build, kubectl apply -f prod.yaml, curl /health), so next time "
        "you replay a known-good recipe instead of re-figuring it out. When you repaired a "
        "procedure you recalled, pass its memory id as supersedes: this becomes its next version.",
        ProcedureBody,
        _procedure,
        fields_of(
            ProcedureBody,
            ("steps", "rationale", "supersedes", "tags", "memory_id", "wait"),
            "ProcedureArguments",
        ),
    ),
    ToolSpec(
        "retain_reasoning",
        "Keep why a decision was made ('chose gRPC over REST: p99 latency mattered'), so the "
        "next similar decision does not re-derive the same trade-off.",
        TextBlockBody,
        _reasoning,
        _block("ReasoningArguments"),
    ),
    ToolSpec(
        "retain_preference",
        "Keep a conditional rule for how the user wants things done ('for day-planning, use "
        "my personal Gmail, never work mail'). Use it when the user states a standing rule; "
        "preferences are the block most worth recalling before acting.",
        TextBlockBody,
        _preference,
        _block("PreferenceArguments"),
    ),
    ToolSpec(
        "retain_correction",
        "Keep a correction the moment the user says 'no, do it this way' ('No: drain the pod "
        "before restart'), in their words. It is the highest-signal feedback there is: "
        "consolidation distills repeated or explicit corrections into preferences, and into "
        "repairs of the procedure step they target.",
        TextBlockBody,
        _correction,
        _block("CorrectionArguments"),
    ),
    ToolSpec(
        "update_profile",
        "Record the user's tools, apps, access and normal patterns ('has admin on AWS, GitHub "
        "and Grafana'), so you never propose a tool they cannot use. The bank has one profile; "
        "this replaces it as a whole.",
        TextBlockBody,
        _profile,
        _block("ProfileArguments"),
    ),
    ToolSpec(
        "recall",
        "The memories of the bank that best match a query, ranked, each with its score "
        "breakdown. Narrow with types: ['procedure'] when about to act, ['reasoning'] when "
        "weighing a similar choice, ['preference', 'correction'] for rules and overrides, "
        "['profile'] when planning what you can do; leave types out for all. For text to put "
        "straight into a prompt, use context instead.",
        RecallRequest,
        _recall,
        fields_of(
            RecallRequest,
            (
                "query",
                "types",
                "k",
                "max_tokens",
                "tags",
                "since",
                "until",
                "prefer_observations",
                "session_id",
                "all_versions",
            ),
            "RecallArguments",
        ),
    ),
    ToolSpec(
        "context",
        "A prompt-ready block of what the bank knows about a query, within max_tokens: rules "
        "first (preferences, then standing corrections), then procedures as numbered steps, "
        "the profile, facts with their dates, and reasoning, each line with its memory id. "
        "Call it before starting a task.",
        ContextRequest,
        _context,
    ),
    ToolSpec(
        "answer",
        "A question answered by the server's chat model from the bank's memories, with the "
        "memory ids it cites (only ids of the context block it was given). Use it when you "
        "want the conclusion rather than the notes; a server without a model answers "
        "not_configured, and context still works there.",
        AnswerRequest,
        _answer,
    ),
    ToolSpec(
        "get_memory",
        "One memory by id, with the full archived event behind it.",
        MemoryRef,
        _get,
    ),
    ToolSpec(
        "forget_memory",
        "Forget one memory, and what was derived from its content, for good (when the user "
        "asks you to forget it, or it is wrong and must not come back).",
        MemoryRef,
        _forget,
    ),
    ToolSpec(
        "consolidate",
        "Run one consolidation round of the bank now: observations from raw facts, "
        "corrections distilled into preferences and procedure repairs, conflicts settled. "
        "It also runs on its own schedule; call it when you need the result at once.",
        NoArguments,
        _consolidate,
    ),
    ToolSpec(
        "list_banks",
        "The banks your key grants, with how many memories of each type each holds.",
        BankListing,
        _list_banks,
        bank_wide=True,
    ),
)

TOOLS_BY_NAME: Mapping[str, ToolSpec[Any]] = {spec.name: spec for spec in TOOLS}


def offered(*, pinned_bank: str | None, several_banks: bool = True) -> tuple[ToolSpec[Any], ...]:
    """The tools a server shows: the bank-wide ones only unpinned, to a caller of several banks."""
    lists_banks = pinned_bank is None and several_banks
    return tuple(spec for spec in TOOLS if lists_banks or not spec.bank_wide)
