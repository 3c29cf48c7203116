"""``AsyncMemoryClient``: the coroutine twin of :class:`cogsub.sdk.client.MemoryClient`.

The same calls with the same arguments, built by the same base; each awaits its
answer instead of blocking, over HTTP or an embedded stack in this process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
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


class AsyncMemoryClient(_BaseClient):
    """Non-blocking twin of ``MemoryClient``: the same methods, awaited.

    ``embedded()`` runs the stack on the caller's event loop; close the client
    (``aclose`` or ``async with``) on that loop.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
        actor: str | None = None,
    ) -> None:
        super().__init__(base_url, api_key=api_key, timeout=timeout, actor=actor)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=self._headers(), timeout=timeout, transport=transport
        )

    @classmethod
    def embedded(
        cls, data_dir: str | Path, *, embedder: EmbedderKind = "minilm"
    ) -> AsyncMemoryClient:
        """A client of a whole embedded stack started on first use on the running loop."""
        transport = find_embedded_stack().async_transport(Path(data_dir), embedder)
        return cls(EMBEDDED_URL, transport=transport, actor=EMBEDDED_ACTOR)

    async def _send(self, call: Call[M]) -> M:
        with mapped_transport_errors():
            response = await self._http.request(
                call.method,
                call.path,
                json=call.json,
                params=call.params,
                content=call.content,
                headers=call.headers,
            )
        return call.parse(response)

    async def retain(
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
        """Keep ``content`` in bank ``bank_id`` (see ``MemoryClient.retain``)."""
        call = self._retain_call(
            bank_id, content, fact_type, tags, timestamp, context, memory_id=memory_id, wait=wait
        )
        return await self._send(call)

    async def retain_procedure(
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
        return await self._send(call)

    async def retain_reasoning(
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
        return await self._send(call)

    async def retain_preference(
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
        return await self._send(call)

    async def retain_correction(
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
        return await self._send(call)

    async def update_profile(
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
        return await self._send(call)

    async def recall(
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
        """The best memories of ``bank_id`` for ``query`` (see ``MemoryClient.recall``)."""
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
        return await self._send(call)

    async def context(
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
        """One recall laid out for a prompt (see ``MemoryClient.context``)."""
        call = self._context_call(
            bank_id, query, max_tokens, types, format=format, tags=tags, session_id=session_id
        )
        return await self._send(call)

    async def answer(
        self,
        bank_id: str,
        question: str,
        max_tokens: int = DEFAULT_ANSWER_TOKENS,
        types: Iterable[FactType | str] | None = None,
        *,
        tags: Sequence[str] | None = None,
        session_id: str | None = None,
    ) -> Answer:
        """The server's chat model's answer with its citations (see ``MemoryClient.answer``)."""
        call = self._answer_call(
            bank_id, question, max_tokens, types, tags=tags, session_id=session_id
        )
        return await self._send(call)

    async def get_memory(self, bank_id: str, memory_id: str) -> MemoryRecord:
        """One memory with its archived event; NotFoundError if the bank has no such memory."""
        return await self._send(self._get_memory_call(bank_id, memory_id))

    async def list_banks(self, *, cursor: str | None = None, limit: int = 100) -> BankPage:
        """One page of the banks this key grants (see ``MemoryClient.list_banks``)."""
        return await self._send(self._list_banks_call(cursor, limit))

    async def memory_pages(
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
    ) -> AsyncIterator[MemoryPage]:
        """The bank's memories newest first, page by page (see ``MemoryClient.memory_pages``)."""
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
            page = await self._send(call)
            yield page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def list_memories(
        self,
        bank_id: str,
        types: Iterable[FactType | str] | None = None,
        tags: Sequence[str] | None = None,
        since: TimeArg = None,
        until: TimeArg = None,
        *,
        include_superseded: bool = False,
        limit: int = DEFAULT_PAGE_LIMIT,
    ) -> AsyncIterator[MemoryRecord]:
        """Every memory of the bank matching the filters, newest first."""
        pages = self.memory_pages(
            bank_id, types, tags, since, until, include_superseded=include_superseded, limit=limit
        )
        async for page in pages:
            for memory in page.memories:
                yield memory

    async def history(self, bank_id: str, memory_id: str) -> MemoryHistory:
        """Where the memory came from and what became of it (see ``MemoryClient.history``)."""
        return await self._send(self._history_call(bank_id, memory_id))

    async def update(
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
        """A new version of the memory that supersedes it (see ``MemoryClient.update``)."""
        fields = update_fields(content, steps, rationale, tags, timestamp, new_memory_id, wait)
        return await self._send(self._update_call(bank_id, memory_id, fields))

    async def consolidate(self, bank_id: str) -> ConsolidationReport:
        """Run one consolidation round of the bank now; returns the ids it produced."""
        return await self._send(self._consolidate_call(bank_id))

    async def feedback(
        self, bank_id: str, memory_ids: Sequence[str], signal: FeedbackSignalArg = "used"
    ) -> int:
        """Reinforce recalled memories (returned / used / helpful); returns how many."""
        return (await self._send(self._feedback_call(bank_id, memory_ids, signal))).updated

    async def forget(self, bank_id: str, memory_id: str) -> ForgetResult:
        """Forget a memory and what was derived from it (see ``MemoryClient.forget``)."""
        return await self._send(self._forget_call(bank_id, memory_id))

    async def forget_bank(self, bank_id: str, *, confirm: str) -> ForgetBankResult:
        """Forget every memory of ``bank_id``; ``confirm`` must repeat the bank id."""
        return await self._send(self._forget_bank_call(bank_id, confirm))

    def export_bank(self, bank_id: str) -> AsyncIterator[str]:
        """The bank as JSON lines, streamed: ``async for line in cm.export_bank(bank)``."""
        return self._lines(self._export_path(bank_id))

    async def _lines(self, path: str) -> AsyncIterator[str]:
        with mapped_transport_errors():
            async with self._http.stream("GET", path, headers={"Accept": JSON_LINES}) as response:
                if response.status_code >= 400:
                    raise error_for(response.status_code, await response.aread())
                async for line in response.aiter_lines():
                    if line:
                        yield line

    async def import_bank(self, bank_id: str, lines: LinesArg) -> ImportResult:
        """Import an export of ``bank_id`` (see ``MemoryClient.import_bank``)."""
        return await self._send(self._import_call(bank_id, lines))

    async def aclose(self) -> None:
        """Close connections (and stop the embedded stack, if this client runs one)."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
