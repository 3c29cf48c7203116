"""Recall by facets: a question about several people is recalled once per person, interleaved.

A multi-hop question such as "What do Jon and Gina both have in common?" needs
turns of each person; one recall of the whole question favours neither (the
speaker cue needs exactly one name) and the head fills with whoever matches
the other words best. :func:`recall_by_facets` asks the question as written and
once per person (:func:`cogsub.recall.query.facets`), then gives each answer a
slot in turn (:func:`interleaved`), so every facet is represented in the top k.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from cogsub.core.memory import MemoryHit, RecallRequest, RecallResponse
from cogsub.recall.query import analyse_query, facets
from cogsub.recall.ranking import Budget

Recall = Callable[[str, RecallRequest], Awaitable[RecallResponse]]
#: Called with every query about to be recalled together, before any of them is.
Prepare = Callable[[Sequence[str]], Awaitable[None]]


async def recall_by_facets(
    recall: Recall, bank_id: str, request: RecallRequest, *, prepare: Prepare | None = None
) -> RecallResponse:
    """``recall`` of ``request``, or of it and each facet interleaved when it has facets.

    ``prepare`` sees the queries first (the memory service embeds each distinct vector
    query once: recalled together, the facets would each have asked the model for the same).
    """
    # A "when" question asks for the date of one event the people shared: one turn says it.
    parts = () if analyse_query(request.query).temporal else facets(request.query)
    if not parts:
        return await recall(bank_id, request)
    # Only the question as asked counts as shown (novelty) and returned (reinforcement): a
    # facet's other hits were never in front of the agent.
    quiet = {"reinforce": False, "session_id": None}
    asked = [request, *(request.model_copy(update={"query": part, **quiet}) for part in parts)]
    if prepare is not None:
        await prepare([each.query for each in asked])
    responses = await asyncio.gather(*(recall(bank_id, each) for each in asked))
    results, used = interleaved([r.results for r in responses], request.k, request.max_tokens)
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
