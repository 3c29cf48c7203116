"""``GET /metrics`` and request metrics on the real app over a live embedded stack.

``create_app`` takes no metrics yet, so these tests mount them on the app it returns;
the crash test wires the middlewares in the order ``create_app`` should use.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from cogsub.api import ApiKeys, ApiLimits, create_app
from cogsub.api.errors import CatchAllMiddleware
from cogsub.api.metrics import MetricsMiddleware, mount_metrics
from cogsub.telemetry.metrics import EXPOSITION_CONTENT_TYPE, Metrics
from tests.services.api.conftest import KEY_A
from tests.services.recall.stack import LiveStack

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
RECALL_ROUTE = "/v1/banks/{bank_id}/recall"


def parse(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def requests_of(found: Samples, route: str, status: int) -> float | None:
    return found.get(
        ("cogsub_http_requests_total", (("route", route), ("status", str(status)))),
    )


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
async def api(
    stack: LiveStack, metrics: Metrics, keys: ApiKeys
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(
        service=stack.service, auth=keys, limits=ApiLimits(max_body_bytes=4_096), readiness=None
    )
    mount_metrics(app, metrics)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        yield client


async def test_metrics_are_served_in_the_text_format_without_a_key(
    api: httpx.AsyncClient,
) -> None:
    response = await api.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"] == EXPOSITION_CONTENT_TYPE
    families = {f.name for f in text_string_to_metric_families(response.text)}
    assert {"cogsub_events_consumed", "cogsub_recall_seconds", "cogsub_retain"} <= families


async def test_requests_are_counted_by_route_template_never_by_bank(
    api: httpx.AsyncClient, banks: tuple[str, str]
) -> None:
    bank_a, bank_b = banks
    auth = {"Authorization": f"Bearer {KEY_A}"}
    retained = await api.post(
        f"/v1/banks/{bank_a}/memories",
        json={"content": "The deploy runbook lives in the ops wiki.", "wait": True},
        headers=auth,
    )
    assert retained.status_code == 201, retained.text
    for _ in range(2):
        recalled = await api.post(
            f"/v1/banks/{bank_a}/recall", json={"query": "deploy runbook"}, headers=auth
        )
        assert recalled.status_code == 200 and recalled.json()["results"]
    refused = await api.post(f"/v1/banks/{bank_b}/recall", json={"query": "x"}, headers=auth)
    assert refused.status_code == 403
    too_big = await api.post(
        f"/v1/banks/{bank_a}/recall", content=b"x" * 5_000, headers={**auth, "content-type": "a/b"}
    )
    assert too_big.status_code == 413
    assert (await api.get(f"/no/such/{bank_a}")).status_code == 404

    text = (await api.get("/metrics")).text
    found = parse(text)
    assert requests_of(found, "/v1/banks/{bank_id}/memories", 201) == 1
    assert requests_of(found, RECALL_ROUTE, 200) == 2
    assert requests_of(found, RECALL_ROUTE, 403) == 1
    assert requests_of(found, "unmatched", 413) == 1  # refused before routing
    assert requests_of(found, "unmatched", 404) == 1
    assert found[("cogsub_http_request_seconds_count", (("route", RECALL_ROUTE),))] == 3
    assert bank_a not in text and bank_b not in text


async def test_a_crash_counts_as_its_500_when_wired_inside_the_catch_all() -> None:
    metrics = Metrics()
    app = FastAPI()

    @app.get("/v1/banks/{bank_id}/boom")
    async def boom(bank_id: str) -> None:
        raise RuntimeError("a bug")

    mount_metrics(app, metrics)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.add_middleware(CatchAllMiddleware)  # the last added is the outermost
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        assert (await client.get("/v1/banks/b1/boom")).status_code == 500
        found = parse((await client.get("/metrics")).text)
    assert requests_of(found, "/v1/banks/{bank_id}/boom", 500) == 1
    assert requests_of(found, "/metrics", 200) is None  # the scrape is counted once it ends


async def test_an_app_without_metrics_has_no_metrics_route(stack: LiveStack) -> None:
    app = create_app(service=stack.service, auth=None, limits=ApiLimits())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        assert (await client.get("/metrics")).status_code == 404
