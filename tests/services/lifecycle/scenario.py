"""A bank with every kind of memory: raw turns and their facts, a procedure repaired to v2,
an observation, and a preference that superseded another; plus a second bank beside it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from cogsub.core.events import FactType
from cogsub.core.memory import RecallRequest, RetainRequest
from cogsub.core.topics import EXPERIENCE_ENRICHED
from tests.services.consolidation.stack import NOW, ConsolidationStack

BANK = "jane"
OTHER = "omar"
TURN = "Caroline: I went to a support group yesterday. My sister lives in Lisbon."
SAME = "Caroline: My sister lives in Lisbon."  # merged into turn-1's fact as more proof
SECRET = "support group"
QUERIES = (
    "where does the sister live",
    "support group",
    "deploy billing restart",
    "load tests staging cluster",
    "billing release Fridays",
    "drain the pod",
)


@dataclass(frozen=True)
class Populated:
    turn: str
    merged_turn: str
    facts: tuple[str, ...]
    procedure_v1: str
    procedure_v2: str
    drain: str
    observations: tuple[str, ...]
    preferences: tuple[str, ...]
    superseded: tuple[str, ...]
    other_turn: str


def retain(
    content: str, fact_type: FactType | None, *, days: int = 0, **fields: object
) -> RetainRequest:
    return RetainRequest(
        content=content,
        fact_type=fact_type,
        timestamp=NOW - timedelta(days=30 - days),
        wait=True,
        **fields,
    )


async def extract_all(stack: ConsolidationStack, count: int) -> list[str]:
    """Run fact extraction over the next ``count`` enriched announcements; the facts made."""
    consumer = stack.bus.consumer([EXPERIENCE_ENRICHED], group="test-extractor")
    created: list[str] = []
    seen = 0
    try:
        while seen < count:
            for record in await consumer.poll(max_records=100, timeout_s=2.0):
                seen += 1
                created += (await stack.facts.handle(record.value)).created
    finally:
        await consumer.close()
    return created


async def populate(stack: ConsolidationStack) -> Populated:
    service = stack.service
    turn = await service.retain(BANK, retain(TURN, None, memory_id="turn-1"))
    other = await service.retain(OTHER, retain(TURN, None, memory_id="turn-omar"))
    again = await service.retain(BANK, retain(SAME, None, days=1, memory_id="turn-2"))
    created = await extract_all(stack, 3)  # the plain turns are the first announcements
    facts = [f for f in created if (await stack.index.get(BANK, f)) is not None]
    steps = ["make build", "kubectl rollout restart deployment/billing", "curl /health"]
    v1 = await service.retain(
        BANK,
        retain("Deploy billing", FactType.PROCEDURE, steps=steps, rationale="standard deploy"),
    )
    drain = await service.retain(
        BANK, retain("No — drain the pod before restart.", FactType.CORRECTION, days=2)
    )
    await service.retain(
        BANK, retain("No — run the load tests on staging cluster B.", FactType.CORRECTION, days=3)
    )
    for day in (5, 9, 14):
        await service.retain(
            BANK,
            retain(
                "Jane prefers to run the load tests on staging cluster A.",
                FactType.WORLD,
                days=day,
                tags=[f"week-{day}"],
            ),
        )
    for day in (6, 10, 15):
        await service.retain(
            BANK,
            retain(
                "Jane ships the billing release on Fridays.",
                FactType.WORLD,
                days=day,
                tags=[f"d{day}"],
            ),
        )
    report = await stack.rounds.run(BANK, decay=False)
    (v2,) = report.procedures
    return Populated(
        turn=turn.memory_id,
        merged_turn=again.memory_id,
        facts=tuple(facts),
        procedure_v1=v1.memory_id,
        procedure_v2=v2,
        drain=drain.memory_id,
        observations=tuple(report.observations),
        preferences=tuple(report.preferences),
        superseded=tuple(report.superseded),
        other_turn=other.memory_id,
    )


Answer = list[tuple[str, str, int | None, str | None, tuple[str, ...], int | None, float]]


async def recall_all(stack: ConsolidationStack, bank: str = BANK) -> list[Answer]:
    """For each fixed query (newest versions, then all versions): what recall answers."""
    answers: list[Answer] = []
    for query in QUERIES:
        for every in (False, True):
            request = RecallRequest(query=query, all_versions=every, reinforce=False, k=20)
            found = await stack.service.recall(bank, request)
            answers.append(
                [
                    (
                        h.id,
                        h.text,
                        h.version,
                        h.superseded_by,
                        tuple(h.supersedes),
                        h.proof_count,
                        round(h.score, 9),
                    )
                    for h in found.results
                ]
            )
    return answers
