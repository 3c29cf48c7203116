"""Every route of the real app over a live stack: retain, typed helpers, recall, get, health."""

from __future__ import annotations

import math

import pytest

from tests.services.api.conftest import AppClient, assert_error


async def test_retain_with_wait_is_201_and_recallable(app_client: AppClient, unique_name: str):
    api = app_client()
    body = {
        "content": "Acme HQ is in Berlin.",
        "fact_type": "world",
        "tags": ["acme"],
        "wait": True,
    }
    response = await api.post(f"/v1/banks/{unique_name}/memories", json=body)
    assert response.status_code == 201, response.text
    result = response.json()
    assert result["recallable"] is True and result["fact_type"] == "world"
    assert response.headers["location"] == f"/v1/banks/{unique_name}/memories/{result['memory_id']}"
    got = await api.get(response.headers["location"])
    assert got.status_code == 200
    record = got.json()
    assert record["text"] == "Acme HQ is in Berlin."
    assert record["archived_event"]["eventId"] == result["memory_id"]
    assert record["archived_event"]["bankId"] == unique_name


async def test_retain_without_wait_is_202_and_becomes_recallable(
    app_client: AppClient, unique_name: str
):
    api = app_client()
    response = await api.post(
        f"/v1/banks/{unique_name}/memories",
        json={"content": "Jane owns the billing service.", "memory_id": "jane-1"},
    )
    assert response.status_code == 202
    assert response.json()["recallable"] is False
    # Retrying with the same id and wait is idempotent and now waits for the memory.
    again = await api.post(
        f"/v1/banks/{unique_name}/memories",
        json={"content": "Jane owns the billing service.", "memory_id": "jane-1", "wait": True},
    )
    assert again.status_code == 201 and again.json()["memory_id"] == "jane-1"


async def test_typed_helpers_store_blocks_verbatim(app_client: AppClient, unique_name: str):
    api = app_client()
    base = f"/v1/banks/{unique_name}"
    blocks = {
        ("POST", "reasonings", "reasoning"): "Chose gRPC over REST: p99 latency mattered more.",
        ("POST", "preferences", "preference"): "For day-planning, use personal Gmail.",
        ("POST", "corrections", "correction"): "No — drain the pod before restart.",
        ("PUT", "profile", "profile"): "Has admin on AWS, GitHub, and Grafana.",
    }
    ids = {}
    for (method, resource, fact_type), text in blocks.items():
        response = await api.request(
            method, f"{base}/{resource}", json={"text": text, "wait": True}
        )
        assert response.status_code == 201, response.text
        assert response.json()["fact_type"] == fact_type
        ids[fact_type] = response.json()["memory_id"]
    for fact_type, memory_id in ids.items():
        record = (await api.get(f"{base}/memories/{memory_id}")).json()
        assert record["fact_type"] == fact_type
        assert record["text"] == blocks[next(k for k in blocks if k[2] == fact_type)]
    recalled = await api.post(
        f"{base}/recall", json={"query": "how should I handle this?", "types": ["correction"]}
    )
    hits = recalled.json()["results"]
    assert [h["fact_type"] for h in hits] == ["correction"]
    assert hits[0]["text"] == "No — drain the pod before restart."


async def test_procedure_steps_and_rationale_round_trip(app_client: AppClient, unique_name: str):
    api = app_client()
    steps = ["make build", "kubectl apply -f prod.yaml", "curl /health"]
    created = await api.post(
        f"/v1/banks/{unique_name}/procedures",
        json={"steps": steps, "rationale": "standard prod deploy", "wait": True},
    )
    assert created.status_code == 201 and created.json()["version"] == 1
    response = await api.post(
        f"/v1/banks/{unique_name}/recall",
        json={"query": "how do I deploy?", "types": ["procedure"]},
    )
    (hit,) = response.json()["results"]
    assert hit["steps"] == steps
    assert hit["rationale"] == "standard prod deploy"
    assert hit["text"] == "1. make build\n2. kubectl apply -f prod.yaml\n3. curl /health\n" + (
        "Rationale: standard prod deploy"
    )


async def test_procedure_v2_is_recalled_and_v1_stays_readable(
    app_client: AppClient, unique_name: str
):
    api = app_client()
    base = f"/v1/banks/{unique_name}"
    v1_steps = ["make build", "kubectl apply -f prod.yaml", "curl /health"]
    v2_steps = ["make build", "kubectl drain billing", "kubectl apply -f prod.yaml", "curl /health"]
    v1 = (await api.post(f"{base}/procedures", json={"steps": v1_steps, "wait": True})).json()
    v2_response = await api.post(
        f"{base}/procedures",
        json={"steps": v2_steps, "rationale": "drain first", "supersedes": v1["memory_id"]}
        | {"wait": True},
    )
    v2 = v2_response.json()
    assert v2["version"] == 2
    query = {"query": "deploy billing with kubectl", "types": ["procedure"]}
    hits = (await api.post(f"{base}/recall", json=query)).json()["results"]
    assert [h["id"] for h in hits] == [v2["memory_id"]]
    assert hits[0]["steps"] == v2_steps and hits[0]["version"] == 2
    every = (await api.post(f"{base}/recall", json=query | {"all_versions": True})).json()
    assert {h["id"] for h in every["results"]} == {v1["memory_id"], v2["memory_id"]}
    old = (await api.get(f"{base}/memories/{v1['memory_id']}")).json()
    assert old["archived_event"]["input"]["structured"]["steps"] == v1_steps
    assert old["archived_event"]["input"]["structured"]["version"] == 1


async def test_supersedes_an_unknown_procedure_is_404(app_client: AppClient, unique_name: str):
    api = app_client()
    response = await api.post(
        f"/v1/banks/{unique_name}/procedures", json={"steps": ["x"], "supersedes": "nope"}
    )
    assert_error(response, 404, "not_found")


async def test_recall_respects_the_token_budget(app_client: AppClient, unique_name: str):
    api = app_client()
    texts = [f"deploy note {i}: " + "billing service rollout details " * (i + 1) for i in range(5)]
    for text in texts:
        response = await api.post(
            f"/v1/banks/{unique_name}/memories", json={"content": text, "wait": True}
        )
        assert response.status_code == 201
    url = f"/v1/banks/{unique_name}/recall"
    unbounded = (await api.post(url, json={"query": "billing rollout"})).json()
    assert len(unbounded["results"]) == 5
    budget = 40
    bounded = (await api.post(url, json={"query": "billing rollout", "max_tokens": budget})).json()
    used = sum(h["tokens"] for h in bounded["results"])
    assert 0 < len(bounded["results"]) < 5
    assert used <= budget and bounded["tokens"] == used


async def test_score_breakdown_sums_to_the_final_score(app_client: AppClient, unique_name: str):
    api = app_client()
    for text in ("Acme HQ is in Berlin.", "Acme ships on Fridays.", "Jane likes tea."):
        await api.post(f"/v1/banks/{unique_name}/memories", json={"content": text, "wait": True})
    response = await api.post(f"/v1/banks/{unique_name}/recall", json={"query": "Acme"})
    hits = response.json()["results"]
    assert len(hits) == 3
    for hit in hits:
        explain = hit["explain"]
        total = sum(weight * explain[name] for name, weight in explain["weights"].items())
        assert math.isclose(explain["final"], total, rel_tol=1e-9, abs_tol=1e-12)
        assert hit["score"] == explain["final"]
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


async def test_get_of_a_missing_memory_is_404(app_client: AppClient, unique_name: str):
    response = await app_client().get(f"/v1/banks/{unique_name}/memories/nothing-here")
    assert_error(response, 404, "not_found")


async def test_health_and_readiness(app_client: AppClient, stack):
    async def index_answers() -> None:
        await stack.index.count("probe")

    api = app_client(readiness={"index": index_answers})
    assert (await api.get("/healthz")).json() == {"status": "ok"}
    assert (await api.get("/readyz")).json() == {"status": "ok"}


async def test_readiness_is_503_with_retry_after_when_the_index_is_gone(
    app_client: AppClient, stack
):
    async def index_answers() -> None:
        await stack.index.count("probe")

    api = app_client(readiness={"index": index_answers})
    await stack.index.close()
    response = await api.get("/readyz")
    error = assert_error(response, 503, "unavailable")
    assert int(response.headers["retry-after"]) >= 1
    assert error["problems"] == [{"field": "index", "rule": "failed"}]
    text = response.text.lower()
    assert "sqlite" not in text and "closed" not in text  # the reason stays in the log
    assert (await api.get("/healthz")).status_code == 200


@pytest.mark.parametrize("path", ["/openapi.json", "/docs"])
async def test_openapi_and_docs_are_served(app_client: AppClient, path: str):
    response = await app_client().get(path)
    assert response.status_code == 200


async def test_openapi_lists_every_route_and_the_bearer_scheme(app_client: AppClient):
    spec = (await app_client().get("/openapi.json")).json()
    paths = spec["paths"]
    assert set(paths) >= {
        "/healthz",
        "/readyz",
        "/v1/banks/{bank_id}/memories",
        "/v1/banks/{bank_id}/memories/{memory_id}",
        "/v1/banks/{bank_id}/procedures",
        "/v1/banks/{bank_id}/reasonings",
        "/v1/banks/{bank_id}/preferences",
        "/v1/banks/{bank_id}/corrections",
        "/v1/banks/{bank_id}/profile",
        "/v1/banks/{bank_id}/recall",
    }
    assert "put" in paths["/v1/banks/{bank_id}/profile"]
    recall = paths["/v1/banks/{bank_id}/recall"]["post"]
    assert recall["operationId"] == "recall"
    assert recall["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ErrorBody"
    )
    assert "HTTPBearer" in spec["components"]["securitySchemes"]
