"""The correction loop and consolidation, end to end over the embedded stack."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from cogsub.core.events import FactType
from cogsub.core.memory import RecallRequest, RetainRequest
from tests.services.consolidation.stack import NOW, consolidation_stack

BANK = "jane"


def _retain(content: str, fact_type: FactType, *, days: int = 0, **fields: object) -> RetainRequest:
    return RetainRequest(
        content=content,
        fact_type=fact_type,
        timestamp=NOW - timedelta(days=30 - days),
        wait=True,
        **fields,  # type: ignore[arg-type]
    )


async def test_a_correction_becomes_a_preference_after_one_round(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        said = "No — for day-planning use my personal Gmail, never the work mail."
        correction = await stack.service.retain(BANK, _retain(said, FactType.CORRECTION))
        report = await stack.rounds.run(BANK)
        assert len(report.preferences) == 1
        found = await stack.service.recall(
            BANK, RecallRequest(query="which mail for day-planning", types=[FactType.PREFERENCE])
        )
        (hit,) = found.results
        assert hit.text == "For day-planning use my personal Gmail, never the work mail."
        assert hit.id == report.preferences[0]
        record = await stack.service.get_memory(BANK, hit.id)
        assert record.archived_event["input"]["structured"]["sources"] == [correction.memory_id]
        assert record.object_storage_key.startswith(f"consolidation/{BANK}/preferences/")


async def test_a_repeated_pattern_does_not_override_an_explicit_correction(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        await stack.service.retain(
            BANK, _retain("No — run the load tests on staging cluster B.", FactType.CORRECTION)
        )
        for day in (5, 9, 14):  # later than the correction, and three times over
            await stack.service.retain(
                BANK,
                _retain(
                    "Jane prefers to run the load tests on staging cluster A.",
                    FactType.WORLD,
                    days=day,
                    tags=[f"week-{day}"],
                ),
            )
        report = await stack.rounds.run(BANK)
        assert len(report.observations) == 1
        assert len(report.preferences) == 2  # the explicit one and the repeated pattern
        assert len(report.superseded) == 1
        found = await stack.service.recall(
            BANK, RecallRequest(query="load tests staging cluster", types=[FactType.PREFERENCE])
        )
        (hit,) = found.results
        assert hit.text == "Run the load tests on staging cluster B."
        assert hit.supersedes == report.superseded
        assert hit.explain.resolution is not None
        assert "explicit correction outranks repeated pattern" in hit.explain.resolution
        every = await stack.service.recall(
            BANK,
            RecallRequest(
                query="load tests staging cluster", types=[FactType.PREFERENCE], all_versions=True
            ),
        )
        loser = next(h for h in every.results if h.id != hit.id)
        assert loser.superseded_by == hit.id
        assert loser.valid_to is not None


async def test_a_procedure_repair_is_recalled_as_version_two(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        steps = ["make build", "kubectl rollout restart deployment/billing", "curl /health"]
        v1 = await stack.service.retain(
            BANK,
            _retain(
                "Deploy billing", FactType.PROCEDURE, steps=steps, rationale="standard prod deploy"
            ),
        )
        await stack.service.retain(
            BANK, _retain("No — drain the pod before restart.", FactType.CORRECTION, days=2)
        )
        report = await stack.rounds.run(BANK)
        assert len(report.procedures) == 1
        assert report.superseded == [v1.memory_id]
        assert report.preferences == []  # a repair, not a preference
        query = RecallRequest(query="deploy billing restart", types=[FactType.PROCEDURE])
        (hit,) = (await stack.service.recall(BANK, query)).results
        assert hit.version == 2
        assert hit.steps == [
            "make build",
            "Drain the pod",
            "kubectl rollout restart deployment/billing",
            "curl /health",
        ]
        assert hit.explain.resolution is not None and "inserted" in hit.explain.resolution
        every = await stack.service.recall(BANK, query.model_copy(update={"all_versions": True}))
        versions = {h.version: h for h in every.results}
        assert set(versions) == {1, 2}
        assert versions[1].steps == steps
        assert versions[1].superseded_by == hit.id


async def test_observations_deduplicate_and_count_their_proof(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        text = "Jane ships the billing release on Fridays."
        for day in (1, 8, 15):
            await stack.service.retain(
                BANK, _retain(text, FactType.WORLD, days=day, tags=[str(day)])
            )
        first = await stack.rounds.run(BANK)
        (obs_id,) = first.observations
        again = await stack.rounds.run(BANK)
        assert again.observations == [] and again.superseded == []
        obs = await stack.index.get(BANK, obs_id)
        assert obs is not None and "proof:3" in obs.tags
        assert "observed 3 times between" in obs.summary
        for source in (await stack.service.get_memory(BANK, obs_id)).archived_event["input"][
            "structured"
        ]["sources"]:
            doc = await stack.index.get(BANK, source)
            assert doc is not None and doc.retrieval_count == 1  # replay reinforced each source
        await stack.service.retain(BANK, _retain(text, FactType.WORLD, days=22, tags=["22"]))
        grown = await stack.rounds.run(BANK)
        (newer,) = grown.observations
        assert grown.superseded == [obs_id]
        doc = await stack.index.get(BANK, newer)
        assert doc is not None and "proof:4" in doc.tags
        found = await stack.service.recall(
            BANK, RecallRequest(query="billing release Fridays", types=[FactType.OBSERVATION])
        )
        assert [h.id for h in found.results] == [newer]


async def test_a_round_is_idempotent(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        await stack.service.retain(
            BANK, _retain("No — always page the on-call lead first.", FactType.CORRECTION)
        )
        for day in (1, 2):
            await stack.service.retain(
                BANK,
                _retain(
                    "Jane reviews pull requests every morning.",
                    FactType.WORLD,
                    days=day,
                    tags=[str(day)],
                ),
            )
        first = await stack.rounds.run(BANK, decay=False)
        assert first.preferences and first.observations
        count = await stack.index.count(BANK)
        objects = [k async for k in stack.archive.list("consolidation/")]
        second = await stack.rounds.run(BANK, decay=False)
        assert (second.observations, second.preferences, second.procedures, second.superseded) == (
            [],
            [],
            [],
            [],
        )
        assert await stack.index.count(BANK) == count
        assert [k async for k in stack.archive.list("consolidation/")] == objects
