"""``recall_candidates`` for OpenSearch, composed of the adapter's own calls.

Not yet one trip: one ``_msearch`` for the text and k-NN searches, then one for
the neighbour window around their best hits, then scans for procedure versions
when a procedure is among the candidates (two requests a recall, three with a
procedure). Folding them into one request needs the neighbour anchors before
the searches have answered, which a single ``_msearch`` cannot express; the
answers are the ones the contract asks for either way.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Protocol

from cogsub.core.documents import IndexDocument
from cogsub.core.memory import PROCEDURE_TAG_PREFIX
from cogsub.index.ports import (
    Candidates,
    Embeddings,
    Hit,
    NeighbourWindow,
    SearchFilters,
    newest_versions,
    procedure_of,
)

#: Documents a procedure-version scan reads a page at a time.
VERSION_PAGE = 500


class SeparateReads(Protocol):
    """The calls a composed recall is made of."""

    async def search_both(
        self,
        query: str,
        vector: Sequence[float],
        filters: SearchFilters,
        *,
        text_size: int,
        vector_size: int,
    ) -> tuple[list[Hit], list[Hit]]: ...

    async def neighbours(
        self,
        filters: SearchFilters,
        anchors: Sequence[IndexDocument],
        *,
        each_side: int,
        within_s: float | None = None,
        exclude: Collection[str] = (),
    ) -> list[IndexDocument]: ...

    async def scan(
        self, filters: SearchFilters, *, size: int, after: str | None = None
    ) -> list[IndexDocument]: ...


async def composed_candidates(
    index: SeparateReads,
    query_text: str,
    query_vector: Sequence[float],
    filters: SearchFilters,
    *,
    text_pool: int,
    vector_pool: int,
    neighbours: NeighbourWindow | None,
    procedure_versions: bool,
) -> Candidates:
    """What ``MemoryIndex.recall_candidates`` answers, from the separate calls."""
    text, vector = await index.search_both(
        query_text, query_vector, filters, text_size=text_pool, vector_size=vector_pool
    )
    near: list[IndexDocument] = []
    if neighbours is not None and neighbours.anchors_each > 0 and neighbours.each_side > 0:
        top = neighbours.anchors_each
        anchors = {h.document.event_id: h.document for h in (*text[:top], *vector[:top])}
        near = await index.neighbours(
            filters,
            list(anchors.values()),
            each_side=neighbours.each_side,
            within_s=neighbours.within_s,
            exclude={h.document.event_id for h in (*text, *vector)},
        )
    docs = [h.document for h in (*text, *vector)] + near
    newest = await _newest(index, filters.bank_id, docs) if procedure_versions else {}
    embeddings = Embeddings.of(list({d.event_id: d for d in docs}.values()))
    return Candidates(
        [_bare_hit(h) for h in text],
        [_bare_hit(h) for h in vector],
        [_bare(d) for d in near],
        newest,
        embeddings,
    )


async def _newest(index: SeparateReads, bank_id: str, docs: list[IndexDocument]) -> dict[str, int]:
    wanted = {p[0] for doc in docs if (p := procedure_of(doc.tags))}
    if not wanted:
        return {}
    tags = frozenset(f"{PROCEDURE_TAG_PREFIX}{pid}" for pid in wanted)
    filters = SearchFilters(bank_id=bank_id, tags_any=tags)
    seen: list[list[str]] = []
    after: str | None = None
    while page := await index.scan(filters, size=VERSION_PAGE, after=after):
        seen += [doc.tags for doc in page]
        after = page[-1].event_id
    return newest_versions(seen, wanted)


def _bare(doc: IndexDocument) -> IndexDocument:
    return doc.model_copy(update={"embedding": []})


def _bare_hit(hit: Hit) -> Hit:
    return replace(hit, document=_bare(hit.document))
