"""``/context`` and ``/answer`` over the real app and a live embedded stack."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute

from cogsub.api import ApiKeys, ApiLimits, create_app
from cogsub.api import context as context_routes
from cogsub.core.context import Answer, ContextBlock
from cogsub.recall.answer import ChatAnswerer, ChatSettings
from cogsub.recall.ranking import estimate_tokens
from cogsub.sdk._base import Call, _BaseClient
from tests.fixtures.chat_server import ChatServer
from tests.services.api.conftest import KEY_A, AppClient, assert_error
from tests.services.recall.stack import LiveStack

V1_STEPS = ["make build", "kubectl apply -f prod.yaml"]
V2_STEPS = ["make build", "kubectl drain billing", "kubectl apply -f prod.yaml"]


async def _bank_of_every_kind(api: httpx.AsyncClient, base: str) -> dict[str, str]:
    """One memory of each kind about deploying, and a procedure in two versions."""

    async def kept(path: str, body: dict[str, object], method: str = "POST") -> str:
        response = await api.request(method, f"{base}/{path}", json=body | {"wait": True})
        assert response.status_code == 201, response.text
        return str(response.json()["memory_id"])

    v1 = await kept("procedures", {"steps": V1_STEPS})
    return {
        "v1": v1,
        "v2": await kept("procedures", {"steps": V2_STEPS, "supersedes": v1}),
        "preference": await kept("preferences", {"text": "When deploying on Fridays, ask first."}),
        "correction": await kept("corrections", {"text": "No: deploy billing with kubectl."}),
        "profile": await kept("profile", {"text": "Jane can deploy billing to prod."}, "PUT"),
        "world": await kept(
            "memories",
            {
                "content": "The billing deploy broke prod once.",
                "fact_type": "world",
                "timestamp": "2024-03-05T10:00:00Z",
            },
        ),
        "reasoning": await kept("reasonings", {"text": "Drain billing first: deploys drop jobs."}),
    }


async def test_the_block_lays_out_one_recall_by_type_within_budget(
    app_client: AppClient, unique_name: str
) -> None:
    api = app_client()
    base = f"/v1/banks/{unique_name}"
    ids = await _bank_of_every_kind(api, base)
    response = await api.post(
        f"{base}/context", json={"query": "deploy billing", "max_tokens": 500}
    )
    assert response.status_code == 200, response.text
    block = ContextBlock.model_validate(response.json())
    assert [s.name for s in block.sections] == [
        "rules",
        "procedures",
        "profile",
        "facts",
        "reasoning",
    ]
    assert [i.memory_id for i in block.sections[0].items] == [ids["preference"], ids["correction"]]
    (procedure,) = block.sections[1].items
    assert (procedure.memory_id, procedure.version) == (ids["v2"], 2)
    assert ids["v1"] not in block.text
    assert (
        f"- [{ids['v2']}] procedure v2:\n  1. make build\n  2. kubectl drain billing" in block.text
    )
    assert f"- [{ids['world']}] 2024-03-05 world: The billing deploy broke prod once." in block.text
    assert all(f"[{memory_id}]" in block.text for memory_id in block.memory_ids())
    assert block.tokens == estimate_tokens(block.text) <= 500

    small = await api.post(f"{base}/context", json={"query": "deploy billing", "max_tokens": 40})
    cut = ContextBlock.model_validate(small.json())
    assert 0 < cut.tokens <= 40 and len(cut.memory_ids()) < len(block.memory_ids())

    as_json = await api.post(
        f"{base}/context",
        json={"query": "deploy billing", "format": "json", "types": ["procedure", "profile"]},
    )
    only = ContextBlock.model_validate(as_json.json())
    assert only.text == "" and [s.name for s in only.sections] == ["procedures", "profile"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "x", "max_tokens": 0}, "max_tokens"),
        ({"query": "x", "max_tokens": 100_001}, "max_tokens"),
        ({"query": "x", "format": "yaml"}, "format"),
        ({"query": ""}, "query"),
        ({"query": "x", "types": ["rumour"]}, "types.0"),
    ],
)
async def test_a_bad_context_request_names_the_field(
    app_client: AppClient, unique_name: str, body: dict[str, object], field: str
) -> None:
    response = await app_client().post(f"/v1/banks/{unique_name}/context", json=body)
    error = assert_error(response, 422, "invalid_input")
    assert field in [p["field"] for p in error["problems"]]


async def test_context_and_answer_need_a_key_granting_the_bank(
    app_client: AppClient, banks: tuple[str, str], keys: ApiKeys
) -> None:
    _, bank_b = banks
    api = app_client(auth=keys, key=KEY_A)
    context = await api.post(f"/v1/banks/{bank_b}/context", json={"query": "x"})
    assert_error(context, 403, "forbidden")
    answer = await api.post(f"/v1/banks/{bank_b}/answer", json={"question": "x"})
    assert_error(answer, 403, "forbidden")


async def test_without_a_model_answer_is_409_naming_the_settings(
    app_client: AppClient, unique_name: str
) -> None:
    response = await app_client().post(
        f"/v1/banks/{unique_name}/answer", json={"question": "how do I deploy?"}
    )
    error = assert_error(response, 409, "not_configured")
    assert "COGSUB_CONSOLIDATION__EXTRACTOR=llm" in error["message"]
    assert "COGSUB_CONSOLIDATION__LLM_MODEL" in error["message"]


async def test_the_answer_cites_only_ids_of_its_block(
    stack: LiveStack, unique_name: str, chat_server: ChatServer
) -> None:
    answerer = ChatAnswerer(ChatSettings(base_url=chat_server.api_url, model="m", timeout_s=5))
    app = create_app(
        service=stack.service,
        auth=None,
        limits=ApiLimits(max_body_bytes=65_536, readiness_timeout_s=1.0),
        answerer=answerer,
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
        base = f"/v1/banks/{unique_name}"
        ids = await _bank_of_every_kind(api, base)
        cited = [ids["v2"], "made-up-id", ids["v1"], ids["v2"]]
        await chat_server.reply(
            json.dumps({"answer": "Drain billing, then apply.", "cited": cited})
        )
        response = await api.post(
            f"{base}/answer", json={"question": "how do I deploy billing?", "max_tokens": 400}
        )
    assert response.status_code == 200, response.text
    answered = Answer.model_validate(response.json())
    assert answered.answer == "Drain billing, then apply."
    assert answered.cited == [ids["v2"]]  # the invented id and the superseded v1 are dropped
    (sent,) = await chat_server.requests()
    prompt = sent["body"]["messages"][1]["content"]
    assert answered.context.text in prompt and "how do I deploy billing?" in prompt
    assert sent["body"]["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize("operation", ["context", "answer"])
def test_the_sdk_calls_the_route_and_reads_its_response_model(operation: str) -> None:
    sdk = _BaseClient("http://127.0.0.1:1")
    calls: dict[str, Call[Any]] = {
        "context": sdk._context_call(
            "jane", "q", 100, None, format="json", tags=None, session_id=None
        ),
        "answer": sdk._answer_call("jane", "q", 100, ["world"], tags=None, session_id=None),
    }
    routes = {r.operation_id: r for r in context_routes.router.routes if isinstance(r, APIRoute)}
    call, route = calls[operation], routes[operation]
    assert route.methods == {call.method}
    assert route.path.format(bank_id="jane") == call.path
    assert call.result is route.response_model


async def test_an_unusable_model_answer_is_503_naming_the_rule(
    stack: LiveStack, unique_name: str, chat_server: ChatServer
) -> None:
    settings = ChatSettings(base_url=chat_server.api_url, model="m", timeout_s=5, max_attempts=1)
    app = create_app(
        service=stack.service,
        auth=None,
        limits=ApiLimits(max_body_bytes=65_536, readiness_timeout_s=1.0),
        answerer=ChatAnswerer(settings),
    )
    await chat_server.reply("Deploy with make, I think.")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://a"
    ) as api:
        response = await api.post(f"/v1/banks/{unique_name}/answer", json={"question": "how?"})
    error = assert_error(response, 503, "unavailable")
    assert "not valid JSON" in error["message"] and response.headers["Retry-After"] == "1"
