"""``MemoryClient``: a blocking shell that sends what the base builds.

It talks to the memory API over HTTP, or to an embedded stack in this process
(``embedded()``) through the very same FastAPI app, so both modes answer alike.
Do not call it from a coroutine (it would stall that event loop); use
:class:`cogsub.sdk.async_client.AsyncMemoryClient` there.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import httpx
from pydantic import BaseModel

from cogsub.core.context import DEFAULT_ANSWER_TOKENS, DEFAULT_CONTEXT_TOKENS, Answer, ContextBlock
from cogsub.core.events import FactType
from cogsub.core.history import MemoryHistory
from cogsub.core.listing import DEFAULT_PAGE_LIMIT, BankPage, MemoryPage
from cogsub.core.memory import ConsolidationReport, MemoryRecord, RecallResponse, RetainResult
from cogsub.sdk._base import (
    DEFAULT_TIMEOUT_S,
    EMBEDDED_ACTOR,
    EMBEDDED_URL,
    JSON_LINES,
    Call,
    ContextArg,
    ContextFormatArg,
    EmbedderKind,
    FeedbackSignalArg,
    ForgetBankResult,
    ForgetResult,
    ImportResult,
    LinesArg,
    TimeArg,
    _BaseClient,
    update_fields,
)
from cogsub.sdk._errors import error_for, mapped_transport_errors
from cogsub.sdk.embedded import find_embedded_stack

M = TypeVar("M", bound=BaseModel)


class MemoryClient(_BaseClient):
    """Blocking client of the memory API; not for use inside a coroutine (see the module doc).

    Args:
        base_url: Where the API listens, e.g. ``http://127.0.0.1:8470``.
        api_key: Sent as ``Authorization: Bearer``; never logged or shown in ``repr``.
        timeout: Seconds for each request (connect, read, write).
        transport: An httpx transport to send through instead of the network.
        actor: Who the audit records of ``forget`` name when the API requires no keys
            (with keys, the server names the key); a short label such as ``billing-bot``.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
        actor: str | None = None,
    ) -> None:
        super().__init__(base_url, api_key=api_key, timeout=timeout, actor=actor)
        self._http = httpx.Client(
            base_url=self.base_url, headers=self._headers(), timeout=timeout, transport=transport
        )

    @classmethod
    def embedded(cls, data_dir: str | Path, *, embedder: EmbedderKind = "minilm") -> MemoryClient:
        """A client of a whole embedded stack run in this process, with data under ``data_dir``.

        The stack (event log, archive, index, embedder, ingestion worker, memory
        service and API app) runs on its own event-loop thread until ``close``.
        """
        transport = find_embedded_stack().transport(Path(data_dir), embedder)
        return cls(EMBEDDED_URL, transport=transport, actor=EMBEDDED_ACTOR)

    def _send(self, call: Call[M]) -> M:
        with mapped_transport_errors():
            response = self._http.request(
                call.method,
                call.path,
                json=call.json,
                params=call.params,
                content=call.content,
                headers=call.headers,
            )
        return call.parse(response)

    def retain(
        self,
        bank_id: str,
        content: str,
        fact_type: FactType | str | None = None,
        tags: Sequence[str] | None = None,
        timestamp: TimeArg = None,
        context: ContextArg = None,
        *,
        memory_id: str | None = None,
        wait: bool = False,
    ) -> RetainResult:
        """Keep ``content`` in bank ``bank_id``; with ``wait``, return once recall finds it.

        Args:
            bank_id: The memory bank (one per user or agent).
            content: The text to keep; typed blocks (``fact_type`` procedure … profile)
                are stored verbatim.
            fact_type: One of the eight memory types, or None for raw experience.
            tags: Labels recall can filter on.
            timestamp: When it happened (timezone-aware); default now.
            context: ``session_id``, ``user_id``, ``agent_id``, ``trace_id``, ``span_id``.
            memory_id: A client-chosen id; retrying with the same id is idempotent.
            wait: Return only once the memory is recallable (``recallable`` tells).
        """
        call = self._retain_call(
            bank_id, content, fact_type, tags, timestamp, context, memory_id=memory_id, wait=wait
        )
        return self._send(call)

    def retain_procedure(
        self,
        bank_id: str,
        steps: Sequence[str],
        rationale: str | None = None,
        *,
        supersedes: str | None = None,
        tags: Sequence[str] | None = None,
        memory_id: str | None = None,
        wait: bool = False,
    ) -> RetainResult:
        """Keep how a task was done; ``supersedes`` names the version this one repairs."""
        call = self._procedure_call(
            bank_id,
            steps,
            rationale,
            supersedes=supersedes,
            tags=tags,
            memory_id=memory_id,
            wait=wait,
        )
        return self._send(call)

    def retain_reasoning(
        self,
        bank_id: str,
        text: str,
        *,
        tags: Sequence[str] | None = None,
        memory_id: str | None = None,
        wait: bool = False,
    ) -> RetainResult:
        """Keep why a decision was made."""
        call = self._text_block_call(
            "reasoning", bank_id, text, tags=tags, memory_id=memory_id, wait=wait
        )
        return self._send(call)

    def retain_preference(
        self,
        bank_id: str,
        text: str,
        *,
        tags: Sequence[str] | None = None,
        memory_id: str | None = None,
        wait: bool = False,
    ) -> RetainResult:
        """Keep a conditional rule for how the user wants things done."""
        call = self._text_block_call(
            "preference", bank_id, text, tags=tags, memory_id=memory_id, wait=wait
        )
        return self._send(call)

    def retain_correction(
        self,
        bank_id: str,
        text: str,
        *,
        tags: Sequence[str] | None = None,
        memory_id: str | None = None,
        wait: bool = False,
    ) -> RetainResult:
        """Keep an in-the-moment "no, do it this way", raw."""
        call = self._text_block_call(
            "correction", bank_id, text, tags=tags, memory_id=memory_id, wait=wait
        )
        return self._send(call)

    def update_profile(
        self,
        bank_id: str,
        text: str,
        *,
        tags: Sequence[str] | None = None,
        memory_id: str | None = None,
        wait: bool = False,
    ) -> RetainResult:
        """Record the user's tools, access and normal patterns."""
        call = self._text_block_call(
            "profile", bank_id, text, tags=tags, memory_id=memory_id, wait=wait
        )
        return self._send(call)

    def recall(
        self,
        bank_id: str,
        query: str,
        types: Iterable[FactType | str] | None = None,
        k: int = 10,
        max_tokens: int | None = None,
        *,
        tags: Sequence[str] | None = None,
        since: TimeArg = None,
        until: TimeArg = None,
        prefer_observations: bool = False,
        session_id: str | None = None,
        all_versions: bool = False,
    ) -> RecallResponse:
        """The best memories of ``bank_id`` for ``query``, each with its score breakdown.

        Args:
            bank_id: The memory bank.
            query: What the agent is about to do or asks about.
            types: Only these fact types (default: every type).
            k: At most this many results.
            max_tokens: Stop adding results before their texts exceed this many tokens.
            tags: Only memories with at least one of these tags.
            since: Only memories at or after this time.
            until: Only memories at or before this time.
            prefer_observations: Boost consolidated observations for a compact answer.
            session_id: Rank memories this session has already seen lower.
            all_versions: Every version of a procedure, not only the newest.
        """
        call = self._recall_call(
            bank_id,
            query,
            types,
            k,
            max_tokens,
            tags=tags,
            since=since,
            until=until,
            prefer_observations=prefer_observations,
            session_id=session_id,
            all_versions=all_versions,
        )
        return self._send(call)

    def context(
        self,
        bank_id: str,
        query: str,
        max_tokens: int = DEFAULT_CONTEXT_TOKENS,
        types: Iterable[FactType | str] | None = None,
        *,
        format: ContextFormatArg = "markdown",
        tags: Sequence[str] | None = None,
        session_id: str | None = None,
    ) -> ContextBlock:
        """One recall laid out for a prompt: rules, procedures, profile, facts, reasoning.

        Args:
            bank_id: The memory bank.
            query: What the agent is about to do or asks about.
            max_tokens: The whole block's budget, counted as recall counts tokens.
            types: Only these fact types (default: every type).
            format: ``markdown`` (``text`` holds the block) or ``json`` (sections only).
            tags: Only memories with at least one of these tags.
            session_id: Rank memories this session has already seen lower.
        """
        call = self._context_call(
            bank_id, query, max_tokens, types, format=format, tags=tags, session_id=session_id
        )
        return self._send(call)

    def answer(
        self,
        bank_id: str,
        question: str,
        max_tokens: int = DEFAULT_ANSWER_TOKENS,
        types: Iterable[FactType | str] | None = None,
        *,
        tags: Sequence[str] | None = None,
        session_id: str | None = None,
    ) -> Answer:
        """The server's chat model's answer over a context block, with the ids it cites.

        ``types``, ``tags`` and ``session_id`` narrow and rank the block as in ``context``.

        Raises:
            NotConfiguredError: the server has no chat model configured.
        """
        call = self._answer_call(
            bank_id, question, max_tokens, types, tags=tags, session_id=session_id
        )
        return self._send(call)

    def get_memory(self, bank_id: str, memory_id: str) -> MemoryRecord:
        """One memory with its archived event; NotFoundError if the bank has no such memory."""
        return self._send(self._get_memory_call(bank_id, memory_id))

    def list_banks(self, *, cursor: str | None = None, limit: int = 100) -> BankPage:
        """One page of the banks this key grants, each with counts by type and newest time."""
        return self._send(self._list_banks_call(cursor, limit))

    def memory_pages(
        self,
        bank_id: str,
        types: Iterable[FactType | str] | None = None,
        tags: Sequence[str] | None = None,
        since: TimeArg = None,
        until: TimeArg = None,
        *,
        include_superseded: bool = False,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE_LIMIT,
    ) -> Iterator[MemoryPage]:
        """The bank's memories newest first, page by page, from ``cursor`` to the end.

        Each page is fetched when iteration reaches it; a page's ``next_cursor`` resumes
        the walk later. Memories retained or forgotten meanwhile never make the walk
        skip or repeat one that stayed.
        """
        while True:
            call = self._list_memories_call(
                bank_id,
                types,
                tags,
                since,
                until,
                include_superseded=include_superseded,
                cursor=cursor,
                limit=limit,
            )
            page = self._send(call)
            yield page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def list_memories(
        self,
        bank_id: str,
        types: Iterable[FactType | str] | None = None,
        tags: Sequence[str] | None = None,
        since: TimeArg = None,
        until: TimeArg = None,
        *,
        include_superseded: bool = False,
        limit: int = DEFAULT_PAGE_LIMIT,
    ) -> Iterator[MemoryRecord]:
        """Every memory of the bank matching the filters, newest first (``memory_pages``)."""
        pages = self.memory_pages(
            bank_id, types, tags, since, until, include_superseded=include_superseded, limit=limit
        )
        for page in pages:
            yield from page.memories

    def history(self, bank_id: str, memory_id: str) -> MemoryHistory:
        """Where the memory came from and what became of it (versions, evidence, signals)."""
        return self._send(self._history_call(bank_id, memory_id))

    def update(
        self,
        bank_id: str,
        memory_id: str,
        content: str | None = None,
        *,
        steps: Sequence[str] | None = None,
        rationale: str | None = None,
        tags: Sequence[str] | None = None,
        timestamp: TimeArg = None,
        new_memory_id: str | None = None,
        wait: bool = False,
    ) -> RetainResult:
        """A new version of the memory that supersedes it; the old stays readable by id.

        ``content`` for every type but procedures, ``steps`` (and ``rationale``) for
        procedures. Tags and context carry over unless given. Raises ConflictError when
        the memory was superseded already (update its newest version).
        """
        fields = update_fields(content, steps, rationale, tags, timestamp, new_memory_id, wait)
        return self._send(self._update_call(bank_id, memory_id, fields))

    def consolidate(self, bank_id: str) -> ConsolidationReport:
        """Run one consolidation round of the bank now; returns the ids it produced.

        Idempotent: a second call over the same memories produces nothing new.
        """
        return self._send(self._consolidate_call(bank_id))

    def feedback(
        self, bank_id: str, memory_ids: Sequence[str], signal: FeedbackSignalArg = "used"
    ) -> int:
        """Reinforce recalled memories (returned / used / helpful); returns how many."""
        return self._send(self._feedback_call(bank_id, memory_ids, signal)).updated

    def forget(self, bank_id: str, memory_id: str) -> ForgetResult:
        """Forget a memory, and what was derived from its content, for good.

        Gone from recall at once; an audit record names the caller, the ids and the
        counts, never the text. NotFoundError if the bank does not hold it (any more).
        """
        return self._send(self._forget_call(bank_id, memory_id))

    def forget_bank(self, bank_id: str, *, confirm: str) -> ForgetBankResult:
        """Forget every memory of ``bank_id``; ``confirm`` must repeat the bank id."""
        return self._send(self._forget_bank_call(bank_id, confirm))

    def export_bank(self, bank_id: str) -> Iterator[str]:
        """The bank as JSON lines (header, objects, trailer), streamed as they come.

        ``with open("bank.jsonl", "w") as f: f.writelines(f"{line}\\n" for line in
        cm.export_bank("alice"))``. A stream without the trailer line was cut short.
        """
        return self._lines(self._export_path(bank_id))

    def _lines(self, path: str) -> Iterator[str]:
        with (
            mapped_transport_errors(),
            self._http.stream("GET", path, headers={"Accept": JSON_LINES}) as response,
        ):
            if response.status_code >= 400:
                raise error_for(response.status_code, response.read())
            for line in response.iter_lines():
                if line:
                    yield line

    def import_bank(self, bank_id: str, lines: LinesArg) -> ImportResult:
        """Import an export of ``bank_id`` (its lines, or the whole text); never overwrites.

        The body is one request, so the server's body limit applies; `cogsub import`
        has no such limit.
        """
        return self._send(self._import_call(bank_id, lines))

    def close(self) -> None:
        """Close connections (and stop the embedded stack, if this client runs one)."""
        self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
