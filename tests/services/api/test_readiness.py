"""``/readyz`` probes the index, the archive and the bus, names what failed, and stays bounded.

The first test runs the app exactly as ``cogsub serve`` wires it (``running_api``) on an
embedded stack and takes its adapters away one at a time; the others pin the timeout
and the rule that a probe still running is joined rather than started again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from cogsub.api import ApiLimits, create_app
from cogsub.embeddings.hash import HashEmbedder
from cogsub.runtime.wiring import embedded_settings, running_api
from tests.services.api.conftest import assert_error
from tests.services.recall.stack import LiveStack


@pytest.fixture
async def served(data_dir: Path) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    settings = embedded_settings(data_dir, embedder="hash")
    async with running_api(settings, with_worker=False, embedder=HashEmbedder()) as api:
        transport = httpx.ASGITransport(app=api.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            yield api, client


def failed(response: httpx.Response) -> list[str]:
    """The dependencies a 503 names (and checks the rest of the answer on the way)."""
    error = assert_error(response, 503, "unavailable")
    assert int(response.headers["retry-after"]) >= 1
    names = [problem["field"] for problem in error["problems"]]
    assert error["message"] == f"not ready: {', '.join(names)} did not answer"
    return names


async def test_readyz_names_each_dependency_that_stops_answering(
    served: tuple[Any, httpx.AsyncClient], data_dir: Path
) -> None:
    api, client = served
    response = await client.get("/readyz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    await api.stack.archive.close()
    assert failed(await client.get("/readyz")) == ["archive"]
    await api.stack.bus.close()
    assert failed(await client.get("/readyz")) == ["archive", "bus"]
    await api.stack.index.close()
    response = await client.get("/readyz")
    assert failed(response) == ["index", "archive", "bus"]
    # Why each failed stays in the log: no paths, no adapter names, no exception text.
    assert str(data_dir) not in response.text
    for word in ("sqlite", "closed", "RuntimeError", "Traceback"):
        assert word.lower() not in response.text.lower()
    assert (await client.get("/healthz")).status_code == 200


class Hanging:
    """A probe that answers only once released, counting how often it was started."""

    def __init__(self) -> None:
        self.started = 0
        self.release = asyncio.Event()

    async def __call__(self) -> None:
        self.started += 1
        await self.release.wait()


def probed_app(stack: LiveStack, probes: dict[str, Any], timeout_s: float) -> FastAPI:
    return create_app(
        service=stack.service,
        auth=None,
        limits=ApiLimits(readiness_timeout_s=timeout_s),
        readiness=probes,
    )


async def test_a_hanging_probe_is_bounded_by_the_timeout_and_joined_not_repeated(
    stack: LiveStack,
) -> None:
    hanging = Hanging()

    async def index_answers() -> None:
        await stack.index.count("probe")

    app = probed_app(stack, {"index": index_answers, "bus": hanging}, timeout_s=0.3)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        began = time.monotonic()
        answers = await asyncio.gather(*(client.get("/readyz") for _ in range(3)))
        took = time.monotonic() - began
        for response in answers:
            assert failed(response) == ["bus"]
            assert response.json()["error"]["problems"][0]["rule"] == (
                "did not answer within 0.3 s"
            )
        assert 0.3 <= took < 2.0
        assert failed(await client.get("/readyz")) == ["bus"]
        assert hanging.started == 1  # four requests, one probe still running
        hanging.release.set()
        response = await client.get("/readyz")
        assert response.status_code == 200, response.text
        assert hanging.started == 2  # the first one finished; this request asked again


async def test_every_probe_runs_at_once(stack: LiveStack) -> None:
    first, second = Hanging(), Hanging()
    app = probed_app(stack, {"archive": first, "bus": second}, timeout_s=0.4)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        began = time.monotonic()
        assert failed(await client.get("/readyz")) == ["archive", "bus"]
        assert time.monotonic() - began < 0.8  # one timeout, not one per probe
        first.release.set()
        second.release.set()
        assert (await client.get("/readyz")).status_code == 200
