"""Recall by facets: a question about several people is recalled once per person, interleaved.

A multi-hop question such as "What do Jon and Gina both have in common?" needs
turns of each person; one recall of the whole question favours neither (the
speaker cue needs exactly one name) and the head fills with whoever matches
the other words best. :func:`recall_by_facets` asks once per person
(:func:`cogsub.recall.query.facets`) and gives each answer a slot in turn
(:func:`interleaved`), so every facet is represented in the top k. The question
as asked is not recalled as well: without it the LoCoMo dev figures are the same
on both held-out folds, at two recalls instead of three (docs/ranking.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from cogsub.core.memory import MemoryHit, RecallRequest, RecallResponse
from cogsub.recall.query import asks_when, facets
from cogsub.recall.ranking import Budget

#: Ranks and fills one request, reading the session's novelty but recording nothing.
Recall = Callable[[str, RecallRequest], Awaitable[RecallResponse]]
#: Records what ``request`` returned: shown to its session, and reinforced if it asks.
Record = Callable[[str, RecallRequest, Sequence[MemoryHit]], None]
#: Called with every query about to be recalled together, before any of them is.
Prepare = Callable[[Sequence[str]], Awaitable[None]]


async def recall_by_facets(
    recall: Recall,
    bank_id: str,
    request: RecallRequest,
    *,
    record: Record,
    prepare: Prepare | None = None,
) -> RecallResponse:
    """``recall`` of ``request``, or of each facet interleaved when it has facets; recorded once.

    Each facet keeps the request's session, so it ranks by what that session was already
    shown; only the interleaved answer is recorded, since only it is put before the agent.
    ``prepare`` sees the queries first (the memory service embeds each distinct vector
    query once: recalled together, the facets would each have asked the model for the same).
    """
    # A "when" question asks for the date of one event the people shared: one turn says it.
    parts = () if asks_when(request.query) else facets(request.query)
    if not parts:
        response = await recall(bank_id, request)
        record(bank_id, request, response.results)
        return response
    asked = [request.model_copy(update={"query": part}) for part in parts]
    if prepare is not None:
        await prepare([each.query for each in asked])
    responses = await asyncio.gather(*(recall(bank_id, each) for each in asked))
    results, used = interleaved([r.results for r in responses], request.k, request.max_tokens)
    record(bank_id, request, results)
    return RecallResponse(
        bank_id=bank_id,
        query=request.query,
        results=results,
        candidates=sum(r.candidates for r in responses),
        tokens=used,
    )


def interleaved(
    rankings: Sequence[Sequence[MemoryHit]], k: int, max_tokens: int | None
) -> tuple[list[MemoryHit], int]:
    """Round robin over ``rankings`` (first ranking first), each memory once, k at most."""
    budget = Budget(max_tokens)
    seen: set[str] = set()
    out: list[MemoryHit] = []
    for depth in range(max((len(r) for r in rankings), default=0)):
        for ranking in rankings:
            if len(out) >= k:
                return out, budget.used
            if depth >= len(ranking) or ranking[depth].id in seen:
                continue
            hit = ranking[depth]
            seen.add(hit.id)
            if budget.admit(hit.tokens):
                out.append(hit)
    return out, budget.used
