"""MemoryClient end to end against a live uvicorn server, embedded, and both giving the same."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from cogsub.api import ApiServer
from cogsub.core.errors import NotFoundError
from cogsub.core.events import FactType
from cogsub.core.memory import RecallResponse
from cogsub.runtime.settings import ApiSettings
from cogsub.runtime.wiring import embedded_settings, running_api
from cogsub.sdk import MemoryClient, PermissionDeniedError

KEY = "live-server-key-0123456789"
T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
FACTS = [
    ("acme-hq", "Acme HQ is in Berlin.", "world"),
    ("jane-billing", "Jane owns the billing service.", "world"),
    ("deploy-friday", "I deployed billing on Friday and rolled back once.", "experience"),
    ("grpc", "Chose gRPC over REST: p99 latency mattered more.", "reasoning"),
    ("gmail", "For day-planning, use personal Gmail, never work mail.", "preference"),
    ("drain", "No — drain the pod before restart.", "correction"),
]
QUERIES = [("how do I deploy billing?", None), ("how should I handle mail?", ["preference"])]


@contextlib.asynccontextmanager
async def live_server(data_dir: Path, *, banks: list[str]) -> AsyncIterator[str]:
    """A real uvicorn server on a free loopback port over a live embedded stack; stopped after."""
    settings = embedded_settings(data_dir, embedder="hash")
    settings = settings.model_copy(update={"api": ApiSettings(keys={KEY: banks})})
    async with running_api(settings, with_worker=True) as running:
        server = ApiServer(running.app, host="127.0.0.1", port=0)
        await server.start()
        try:
            yield server.url
        finally:
            await server.stop()


def _keep(client: MemoryClient, bank: str) -> None:
    # Memory ids name archive objects, which are not per bank: each bank gets its own ids.
    for i, (memory_id, text, fact_type) in enumerate(FACTS):
        when = T0 + timedelta(hours=i)
        kept = client.retain(
            bank, text, fact_type, ["seed"], when, memory_id=f"{bank}-{memory_id}", wait=True
        )
        assert kept.recallable
    client.retain_procedure(
        bank,
        ["make build", "kubectl apply -f prod.yaml", "curl /health"],
        rationale="standard prod deploy",
        memory_id=f"{bank}-deploy-v1",
        wait=True,
    )


def _summary(response: RecallResponse) -> list[tuple[object, ...]]:
    return [
        (h.id, h.text, h.fact_type, h.tokens, h.steps, h.rationale, h.version)
        for h in response.results
    ]


async def test_sync_client_end_to_end_over_a_live_server(data_dir: Path, unique_name: str):
    other = f"{unique_name}-other"

    def flow(url: str) -> None:
        with MemoryClient(url, api_key=KEY, timeout=20) as cm:
            steps = ["make build", "kubectl apply -f prod.yaml", "curl /health"]
            v1 = cm.retain_procedure(
                unique_name, steps, rationale="standard prod deploy", wait=True
            )
            v2 = cm.retain_procedure(
                unique_name,
                ["make build", "kubectl drain", *steps[1:]],
                supersedes=v1.memory_id,
                wait=True,
            )
            cm.update_profile(unique_name, "Has admin on AWS, GitHub, and Grafana.", wait=True)
            hits = cm.recall(unique_name, "how do I deploy?", types=["procedure"]).results
            assert [h.id for h in hits] == [v2.memory_id]
            assert cm.get_memory(unique_name, v1.memory_id).text.startswith("1. make build")
            profile = cm.recall(unique_name, "what can the user access?", types=["profile"])
            assert profile.results[0].text == "Has admin on AWS, GitHub, and Grafana."
            with pytest.raises(NotFoundError):
                cm.get_memory(unique_name, "absent")
        with MemoryClient(url, api_key="y" * 24) as stranger, pytest.raises(Exception) as denied:
            stranger.recall(unique_name, "deploy")
        assert type(denied.value).__name__ == "AuthenticationError"
        with MemoryClient(url, api_key=KEY) as cm, pytest.raises(PermissionDeniedError):
            cm.recall("someone-else", "deploy")
        assert httpx.get(f"{url}/readyz", timeout=5).json() == {"status": "ok"}

    async with live_server(data_dir, banks=[unique_name, other]) as url:
        await asyncio.to_thread(flow, url)
    async with httpx.AsyncClient() as probe:
        with pytest.raises(httpx.ConnectError):  # stopped: the port no longer answers
            await probe.get(f"{url}/healthz", timeout=2)


async def test_http_and_embedded_give_the_same_results(tmp_path: Path, unique_name: str):
    banks = [f"{unique_name}-{i}" for i in range(len(QUERIES))]

    def over(client: MemoryClient) -> list[RecallResponse]:
        for bank in banks:
            _keep(client, bank)
        # One recall per bank: retrieval feedback from one query never colours another.
        return [
            client.recall(bank, query, types=types)
            for bank, (query, types) in zip(banks, QUERIES, strict=True)
        ]

    async with live_server(tmp_path / "http", banks=banks) as url:
        with MemoryClient(url, api_key=KEY) as remote:
            by_http = await asyncio.to_thread(over, remote)

    def embedded() -> list[RecallResponse]:
        with MemoryClient.embedded(tmp_path / "embedded", embedder="hash") as local:
            return over(local)

    by_embedded = await asyncio.to_thread(embedded)
    assert by_http[0].results and by_http[1].results
    assert {h.fact_type for h in by_http[1].results} == {FactType.PREFERENCE}
    for remote_answer, local_answer in zip(by_http, by_embedded, strict=True):
        assert _summary(remote_answer) == _summary(local_answer)
        assert remote_answer.candidates == local_answer.candidates
        for a, b in zip(remote_answer.results, local_answer.results, strict=True):
            assert math.isclose(a.score, b.score, rel_tol=1e-6)  # recency moves by milliseconds


async def test_the_sync_embedded_client_works_even_inside_a_coroutine(
    tmp_path: Path, unique_name: str
):
    # Blocking the test's loop on purpose: the stack runs on its own loop thread, so it answers.
    with MemoryClient.embedded(tmp_path / "data", embedder="hash") as cm:
        kept = cm.retain_reasoning(unique_name, "Chose gRPC over REST.", wait=True)
        assert kept.recallable
        assert cm.get_memory(unique_name, kept.memory_id).text == "Chose gRPC over REST."
    with pytest.raises(RuntimeError, match="closed"):
        cm.recall(unique_name, "gRPC")


def test_a_closed_sync_embedded_client_can_be_closed_again(tmp_path: Path):
    client = MemoryClient.embedded(tmp_path / "data", embedder="hash")
    client.close()
    client.close()


async def test_consolidate_and_feedback_over_http_and_embedded(tmp_path: Path, unique_name: str):
    def flow(cm: MemoryClient, bank: str) -> None:
        said = cm.retain_correction(bank, "No — drain the pod before restart.", wait=True)
        report = cm.consolidate(bank)
        assert report.bank_id == bank and len(report.preferences) == 1
        assert cm.consolidate(bank).preferences == []  # idempotent
        (hit,) = cm.recall(bank, "restart the pod", types=["preference"]).results
        assert hit.text == "Drain the pod before restart."
        assert cm.feedback(bank, [hit.id, said.memory_id], "helpful") == 2
        assert cm.get_memory(bank, hit.id).retrieval_count >= 3
        with pytest.raises(NotFoundError):
            cm.feedback(bank, ["no-such-memory"], "used")

    async with live_server(tmp_path / "http", banks=[unique_name]) as url:

        def remote() -> None:
            with MemoryClient(url, api_key=KEY, timeout=20) as cm:
                flow(cm, unique_name)

        await asyncio.to_thread(remote)

    def embedded() -> None:
        with MemoryClient.embedded(tmp_path / "embedded", embedder="hash") as cm:
            flow(cm, f"{unique_name}-local")

    await asyncio.to_thread(embedded)
