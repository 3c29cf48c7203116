"""AsyncMemoryClient in-process against the real app (ASGITransport) over a live stack."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from cogsub.api import ApiKeys, ApiLimits, create_app
from cogsub.core.errors import ConfigurationError, InvalidInputError, NotFoundError
from cogsub.core.events import FactType
from cogsub.sdk import AsyncMemoryClient, AuthenticationError, PermissionDeniedError
from tests.services.recall.stack import LiveStack, live_stack

KEY_A = "sdk-key-for-bank-a-0123456789"
KEY_B = "sdk-key-for-bank-b-0123456789"
Connect = Callable[..., AsyncMemoryClient]


@pytest.fixture
async def stack(data_dir: Path) -> AsyncIterator[LiveStack]:
    async with live_stack(data_dir) as running:
        yield running


@pytest.fixture
async def connect(stack: LiveStack, unique_name: str) -> AsyncIterator[Connect]:
    keys = ApiKeys({KEY_A: [unique_name], KEY_B: [f"{unique_name}-b"]})
    app = create_app(service=stack.service, auth=keys, limits=ApiLimits(max_body_bytes=8_192))
    opened: list[AsyncMemoryClient] = []

    def make(api_key: str | None = KEY_A) -> AsyncMemoryClient:
        client = AsyncMemoryClient(
            "http://api", api_key=api_key, transport=httpx.ASGITransport(app=app)
        )
        opened.append(client)
        return client

    yield make
    for client in opened:
        await client.aclose()


async def test_the_seed_examples_round_trip(connect: Connect, unique_name: str):
    cm = connect()
    bank = unique_name
    steps = ["make build", "kubectl apply -f prod.yaml", "curl /health"]
    procedure = await cm.retain_procedure(bank, steps, rationale="standard prod deploy", wait=True)
    reasoning = await cm.retain_reasoning(
        bank, "Chose gRPC over REST: p99 latency mattered more.", wait=True
    )
    await cm.retain_preference(
        bank, "For day-planning, use personal Gmail, never work mail.", wait=True
    )
    await cm.retain_correction(bank, "No — drain the pod before restart.", wait=True)
    profile = await cm.update_profile(bank, "Has admin on AWS, GitHub, and Grafana.", wait=True)
    world = await cm.retain(
        bank_id=bank, content="Acme HQ is in Berlin.", fact_type="world", wait=True
    )
    assert procedure.fact_type is FactType.PROCEDURE and procedure.version == 1
    assert profile.fact_type is FactType.PROFILE and world.recallable

    only = await cm.recall(bank, "how do I deploy?", types=["procedure"])
    assert [h.id for h in only.results] == [procedure.memory_id]
    assert only.results[0].steps == steps
    assert only.results[0].rationale == "standard prod deploy"
    rules = await cm.recall(bank, "how should I handle this?", types=["preference", "correction"])
    assert {h.fact_type for h in rules.results} == {FactType.PREFERENCE, FactType.CORRECTION}
    everything = await cm.recall(bank, "deploy")
    assert len(everything.results) == 6
    record = await cm.get_memory(bank, reasoning.memory_id)
    assert record.text == "Chose gRPC over REST: p99 latency mattered more."
    assert record.fact_type is FactType.REASONING


async def test_procedure_versions_through_the_sdk(connect: Connect, unique_name: str):
    cm = connect()
    v1 = await cm.retain_procedure(unique_name, ["make build", "kubectl apply"], wait=True)
    v2 = await cm.retain_procedure(
        unique_name,
        ["make build", "kubectl drain", "kubectl apply"],
        rationale="drain first",
        supersedes=v1.memory_id,
        wait=True,
    )
    assert v2.version == 2
    hits = (await cm.recall(unique_name, "kubectl apply", types=["procedure"])).results
    assert [h.id for h in hits] == [v2.memory_id] and hits[0].version == 2
    old = await cm.get_memory(unique_name, v1.memory_id)
    assert old.archived_event["input"]["structured"]["steps"] == ["make build", "kubectl apply"]  # type: ignore[index]


async def test_budget_and_breakdown_through_the_sdk(connect: Connect, unique_name: str):
    cm = connect()
    for i in range(4):
        await cm.retain(unique_name, f"billing rollout step {i} " + "detail " * (5 * i), wait=True)
    response = await cm.recall(unique_name, "billing rollout", max_tokens=30)
    assert sum(h.tokens for h in response.results) == response.tokens <= 30
    assert 0 < len(response.results) < 4
    for hit in response.results:
        weights = hit.explain.weights
        total = sum(w * getattr(hit.explain, name) for name, w in weights.items())
        assert math.isclose(hit.explain.final, total, rel_tol=1e-9)


async def test_server_errors_become_domain_errors(connect: Connect, unique_name: str):
    with pytest.raises(AuthenticationError, match="missing API key"):
        await connect(api_key=None).recall(unique_name, "x")
    with pytest.raises(AuthenticationError, match="unknown API key"):
        await connect(api_key="x" * 20).recall(unique_name, "x")
    with pytest.raises(PermissionDeniedError, match="does not grant"):
        await connect(api_key=KEY_B).recall(unique_name, "x")
    with pytest.raises(NotFoundError, match="no memory"):
        await connect().get_memory(unique_name, "absent")
    with pytest.raises(NotFoundError, match="supersedes"):
        await connect().retain_procedure(unique_name, ["x"], supersedes="absent")
    with pytest.raises(InvalidInputError, match="larger than 8192 bytes") as too_big:
        await connect().retain(unique_name, "x" * 10_000)
    assert too_big.value.problems[0].field == "(body)"


async def test_the_async_embedded_client_runs_the_whole_stack(tmp_path: Path, unique_name: str):
    async with AsyncMemoryClient.embedded(tmp_path / "data", embedder="hash") as cm:
        result = await cm.retain_correction(unique_name, "No — drain the pod first.", wait=True)
        assert result.recallable
        hits = (await cm.recall(unique_name, "drain the pod", types=["correction"])).results
        assert [h.text for h in hits] == ["No — drain the pod first."]
    assert (tmp_path / "data" / "bus.sqlite3").exists()
    # A second client on the same directory sees what the first one kept.
    async with AsyncMemoryClient.embedded(tmp_path / "data", embedder="hash") as again:
        record = await again.get_memory(unique_name, result.memory_id)
        assert record.text == "No — drain the pod first."


async def test_an_embedded_client_on_a_taken_directory_says_so(tmp_path: Path, unique_name: str):
    data = tmp_path / "data"
    async with AsyncMemoryClient.embedded(data, embedder="hash") as owner:
        await owner.retain(unique_name, "the owner's worker holds the directory", wait=True)
        second = AsyncMemoryClient.embedded(data, embedder="hash")
        deadline = asyncio.get_running_loop().time() + 10
        with pytest.raises(ConfigurationError, match="already has a live consumer"):
            while asyncio.get_running_loop().time() < deadline:
                await second.recall(unique_name, "anything")  # answers until its worker fails
                await asyncio.sleep(0.05)  # the worker's failure has no event to await
        await second.aclose()  # already reported: closing does not raise it again
