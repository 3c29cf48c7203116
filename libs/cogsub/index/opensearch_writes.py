"""Conditional writes of the OpenSearch adapter: updates, decays and deletes.

Each write holds only at the version (``_seq_no``, ``_primary_term``) read just
before it, so a document another writer changed in between is read again (in
real time, by ``mget``) and written from its new value; one that was deleted
meanwhile is skipped. A bank's writes touch only its own documents: versions are
read with the bank and kept only where it matches.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any

import opensearchpy

from cogsub.core.documents import IndexDocument
from cogsub.core.errors import ConflictError, InvalidInputError, NotFoundError
from cogsub.index import opensearch_queries as queries
from cogsub.index.opensearch_errors import (
    raise_for_failures,
    stored_document,
    translated,
)
from cogsub.index.ports import DecayStep, DocumentPatch

#: Documents ``update_many`` patches at once (each is a get and a conditional index).
_UPDATE_CONCURRENCY = 16


class ConditionalWrites:
    """Updates, decays and deletes in one index, each at the version it read, racing writers."""

    def __init__(
        self, client: opensearchpy.AsyncOpenSearch, index: str, *, bulk_size: int, max_attempts: int
    ) -> None:
        self._client = client
        self._index = index
        self._bulk_size = bulk_size
        self._max_attempts = max_attempts

    async def versioned(self, bank_id: str, event_id: str) -> tuple[IndexDocument, int, int] | None:
        try:
            with translated("get"):
                doc_id = queries.document_id(bank_id, event_id)
                response = await self._client.get(index=self._index, id=doc_id)
        except NotFoundError:
            return None
        doc = stored_document(response["_source"])
        if (doc.bank_id, doc.event_id) != (bank_id, event_id):
            return None
        return doc, int(response["_seq_no"]), int(response["_primary_term"])

    async def update(self, bank_id: str, event_id: str, patch: DocumentPatch) -> IndexDocument:
        """Apply ``patch`` with compare-and-set on ``_seq_no``, retrying lost races.

        Raises:
            NotFoundError: no such document in ``bank_id``.
            InvalidInputError: the patched document breaks a bound (importance > 1...).
            ConflictError: still losing races after ``max_update_attempts``.
        """
        for _ in range(self._max_attempts):
            found = await self.versioned(bank_id, event_id)
            if found is None:
                raise NotFoundError(f"no document {event_id!r} in bank {bank_id!r}")
            current, seq_no, primary_term = found
            updated = patch.applied_to(current)
            if updated == current:
                return current
            try:
                with translated("update", bad_request=InvalidInputError):
                    await self._client.index(
                        index=self._index,
                        id=queries.document_id(bank_id, event_id),
                        body=updated.to_source(),
                        if_seq_no=seq_no,
                        if_primary_term=primary_term,
                        refresh=queries.REFRESH,
                    )
            except ConflictError:
                await backoff()
                continue
            return updated
        raise ConflictError(f"update of {event_id!r} lost {self._max_attempts} races in a row")

    async def update_many(self, bank_id: str, patches: Mapping[str, DocumentPatch]) -> int:
        """``update`` for each patch, ``_UPDATE_CONCURRENCY`` at a time; how many were found.

        The compare-and-set of ``update`` is per document, so its updates run side by
        side and share the index's refreshes instead of waiting for one each in turn.
        """
        limit = asyncio.Semaphore(_UPDATE_CONCURRENCY)

        async def one(event_id: str, patch: DocumentPatch) -> bool:
            async with limit:
                try:
                    await self.update(bank_id, event_id, patch)
                except NotFoundError:
                    return False
                return True

        found = await asyncio.gather(*(one(i, p) for i, p in patches.items()))
        return sum(found)

    async def delete(self, bank_id: str, doc_ids: list[str]) -> int:
        """Delete ``doc_ids`` of ``bank_id`` (by ``_id``); how many were removed."""
        deleted = 0
        for start in range(0, len(doc_ids), self._bulk_size):
            deleted += await self._delete_chunk(bank_id, doc_ids[start : start + self._bulk_size])
        return deleted

    async def decay(self, bank_id: str, step: DecayStep, hits: list[Any]) -> int:
        decayed = 0
        for _ in range(self._max_attempts):
            lines = queries.bulk_decay_lines(self._index, hits, step)
            conflicted: list[str] = []
            for start in range(0, len(lines), 2 * self._bulk_size):
                chunk = lines[start : start + 2 * self._bulk_size]
                with translated("decay page"):
                    response = await self._client.bulk(body=chunk, refresh=queries.REFRESH)
                failures = queries.bulk_failures(response)
                # 404: deleted since the page was read (forgotten), so nothing to decay;
                # 409: changed since, so read again and decay what it is now.
                raise_for_failures([f for f in failures if f.status not in (404, 409)])
                decayed += len(chunk) // 2 - len(failures)
                conflicted += [
                    chunk[2 * f.position]["update"]["_id"] for f in failures if f.status == 409
                ]
            if not conflicted:
                return decayed
            await backoff()
            hits = await self._decay_signals(bank_id, conflicted)
        raise ConflictError(f"decay of a page lost {self._max_attempts} races in a row")

    async def _decay_signals(self, bank_id: str, doc_ids: list[str]) -> list[Any]:
        """The decay signals and versions of documents by ``_id``, read in real time, of this
        bank only.

        A search would answer from the last refresh, which may not hold the write that
        won the race yet: the same stale version, and the same conflict, again.
        """
        with translated("mget"):
            response = await self._client.mget(
                index=self._index,
                body={"ids": doc_ids},
                _source_includes="bank_id,decay_factor,event_id,timestamp",
            )
        return [
            found
            for found in response["docs"]
            if found.get("found") and found["_source"].get("bank_id") == bank_id
        ]

    async def _delete_chunk(self, bank_id: str, doc_ids: list[str]) -> int:
        deleted = 0
        pending = doc_ids
        for _ in range(self._max_attempts):
            versions = await self._bank_versions(bank_id, pending)
            if not versions:
                return deleted
            lines = queries.bulk_delete_lines(self._index, versions)
            with translated("bulk delete"):
                response = await self._client.bulk(body=lines, refresh=queries.REFRESH)
            pending, refused = [], []
            for failure in queries.bulk_failures(response):
                if failure.status == 409:  # changed since the mget: read it again
                    pending.append(lines[failure.position]["delete"]["_id"])
                else:
                    refused.append(failure)
            raise_for_failures(refused)
            deleted += sum(
                1 for item in response["items"] if item.get("delete", {}).get("result") == "deleted"
            )
            if not pending:
                return deleted
            await backoff()
        raise ConflictError(f"delete of {len(pending)} documents lost {self._max_attempts} races")

    async def _bank_versions(self, bank_id: str, doc_ids: list[str]) -> dict[str, tuple[int, int]]:
        """``_id -> (_seq_no, _primary_term)`` of this bank's documents among ``doc_ids``."""
        try:
            with translated("mget"):
                response = await self._client.mget(
                    index=self._index, body={"ids": doc_ids}, _source_includes="bank_id"
                )
        except NotFoundError:  # no index yet: nothing in it to delete
            return {}
        return {
            found["_id"]: (int(found["_seq_no"]), int(found["_primary_term"]))
            for found in response["docs"]
            if found.get("found") and found["_source"].get("bank_id") == bank_id
        }


async def backoff() -> None:
    # Jitter spreads out writers that lost the same race, so they do not collide again.
    await asyncio.sleep(random.uniform(0.0, 0.005))
