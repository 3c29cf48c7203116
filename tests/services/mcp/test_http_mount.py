"""``/mcp`` and ``/mcp/{bank_id}`` in the API app, driven by the official MCP client in-process."""

from __future__ import annotations

from typing import Any

import httpx
import httpx2
import pytest
from fastapi import FastAPI

from cogsub.api import ApiLimits, create_app
from cogsub.api.auth import HostGuard
from cogsub.api.server import HostGuardMiddleware
from cogsub.mcp import TOOLS
from tests.services.mcp.conftest import (
    KEY_A,
    KEY_ALL,
    failed,
    http_session,
    running_app,
    succeeded,
)

BASE = "http://127.0.0.1"


def _session(app: FastAPI, path: str, key: str | None):
    return http_session(BASE, path, key, transport=httpx2.ASGITransport(app=app))


async def test_the_unpinned_endpoint_lists_bank_tools_and_list_banks_to_a_key_of_several(
    stack, banks
):
    async with running_app(stack, banks) as app:
        async with _session(app, "/mcp", KEY_ALL) as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            bank = banks[1]
            arguments = {"bank_id": bank, "text": "No: staging first.", "wait": True}
            succeeded(await session.call_tool("retain_correction", arguments))
            page = succeeded(await session.call_tool("list_banks", {"limit": 1000}))
            listed = {summary["bank_id"]: summary for summary in page["banks"]}
            assert listed[bank]["counts"] == {"correction": 1} and listed[bank]["total"] == 1
        assert "list_banks" in tools and len(tools) == len(TOOLS)
        assert tools["recall"].input_schema["required"] == ["bank_id", "query"]
        assert "no, do it this way" in tools["retain_correction"].description
        async with _session(app, "/mcp", KEY_A) as one_bank:
            names = {tool.name for tool in (await one_bank.list_tools()).tools}
            assert "list_banks" not in names and len(names) == len(TOOLS) - 1
            listed = failed(await one_bank.call_tool("list_banks", {}), "not_found")
            assert "no tool 'list_banks' here" in listed["message"]
            unknown = failed(await one_bank.call_tool("no_such_tool", {}), "not_found")
            assert "no tool 'no_such_tool' here" in unknown["message"]


async def test_the_pinned_endpoint_hides_the_bank_and_the_bank_wide_tools(stack, banks):
    async with running_app(stack, banks) as app:
        async with _session(app, f"/mcp/{banks[0]}", KEY_A) as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert "list_banks" not in tools and len(tools) == len(TOOLS) - 1
            assert all(
                "bank_id" not in t.input_schema.get("properties", {}) for t in tools.values()
            )
            retained = succeeded(
                await session.call_tool(
                    "retain", {"content": "Acme HQ is in Berlin.", "wait": True}
                )
            )
        assert retained["bank_id"] == banks[0] and retained["recallable"] is True


async def test_each_type_is_retained_recalled_by_type_and_forgotten(stack, banks):
    async with running_app(stack, banks) as app:
        bank = banks[0]
        async with _session(app, "/mcp", KEY_A) as session:
            calls: dict[str, dict[str, Any]] = {
                "retain": {"content": "Jane owns the billing service.", "fact_type": "world"},
                "retain_procedure": {
                    "steps": ["make build", "kubectl apply -f prod.yaml", "curl /health"],
                    "rationale": "standard prod deploy",
                },
                "retain_reasoning": {"text": "Chose gRPC over REST: p99 latency mattered more."},
                "retain_preference": {"text": "For day-planning, use personal Gmail, never work."},
                "retain_correction": {"text": "No: drain the pod before restart."},
                "update_profile": {"text": "Has admin on AWS, GitHub, and Grafana."},
            }
            kept = {}
            for tool, arguments in calls.items():
                body = succeeded(
                    await session.call_tool(tool, {"bank_id": bank, **arguments, "wait": True})
                )
                assert body["recallable"] is True
                kept[tool] = body
            assert kept["retain_procedure"]["fact_type"] == "procedure"
            assert kept["update_profile"]["fact_type"] == "profile"

            found = succeeded(
                await session.call_tool(
                    "recall", {"bank_id": bank, "query": "how do I deploy?", "types": ["procedure"]}
                )
            )
            assert [hit["id"] for hit in found["results"]] == [
                kept["retain_procedure"]["memory_id"]
            ]
            assert found["results"][0]["steps"][0] == "make build"

            block = await session.call_tool(
                "context", {"bank_id": bank, "query": "deploy billing with Gmail on AWS"}
            )
            laid_out = succeeded(block)
            text = block.content[0].text
            assert text == laid_out["text"] and laid_out["tokens"] <= laid_out["max_tokens"]
            rule = kept["retain_preference"]["memory_id"]
            steps = kept["retain_procedure"]["memory_id"]
            assert rule in text and steps in text
            assert text.index(rule) < text.index(steps)  # rules first, then procedures
            as_json = succeeded(
                await session.call_tool(
                    "context", {"bank_id": bank, "query": "deploy", "format": "json"}
                )
            )
            assert as_json["text"] == "" and as_json["sections"]

            no_model = failed(
                await session.call_tool("answer", {"bank_id": bank, "question": "deploy how?"}),
                "not_configured",
            )
            assert "COGSUB_" in no_model["message"]  # it names the settings to set

            memory_id = kept["retain_correction"]["memory_id"]
            got = succeeded(
                await session.call_tool("get_memory", {"bank_id": bank, "memory_id": memory_id})
            )
            assert got["text"] == "No: drain the pod before restart."
            succeeded(
                await session.call_tool("forget_memory", {"bank_id": bank, "memory_id": memory_id})
            )
            gone = await session.call_tool("get_memory", {"bank_id": bank, "memory_id": memory_id})
            failed(gone, "not_found")


async def test_a_key_for_bank_a_is_refused_bank_b_as_a_tool_error(stack, banks):
    async with running_app(stack, banks) as app:
        bank_a, bank_b = banks
        async with _session(app, "/mcp", KEY_ALL) as owner:
            succeeded(
                await owner.call_tool(
                    "retain", {"bank_id": bank_b, "content": "B's vault: 4711", "wait": True}
                )
            )
        async with _session(app, "/mcp", KEY_A) as session:
            refused = failed(
                await session.call_tool("recall", {"bank_id": bank_b, "query": "vault"}),
                "forbidden",
            )
            assert "does not grant that bank" in refused["message"]
            failed(
                await session.call_tool("retain", {"bank_id": bank_b, "content": "planted"}),
                "forbidden",
            )
            # the same session goes on serving the bank the key grants
            succeeded(await session.call_tool("recall", {"bank_id": bank_a, "query": "vault"}))
        async with _session(app, f"/mcp/{bank_b}", KEY_A) as pinned:
            failed(await pinned.call_tool("recall", {"query": "vault"}), "forbidden")


async def test_malformed_arguments_are_tool_errors_naming_the_field(stack, banks):
    async with running_app(stack, banks) as app, _session(app, "/mcp", KEY_A) as session:
        error = failed(
            await session.call_tool("recall", {"bank_id": banks[0], "query": "q", "k": 0}),
            "invalid_input",
        )
        assert [p["field"] for p in error["problems"]] == ["k"]
        error = failed(
            await session.call_tool("retain_procedure", {"steps": "make"}), "invalid_input"
        )
        assert {p["field"] for p in error["problems"]} == {"bank_id", "steps"}
        unknown = await session.call_tool("no_such_tool", {})
        assert unknown.is_error and "recall" in str(unknown.content[0])
        # nothing crashed: the next call is served
        succeeded(await session.call_tool("recall", {"bank_id": banks[0], "query": "q"}))


async def test_without_a_known_key_the_endpoint_answers_401(stack, banks):
    async with running_app(stack, banks) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
            for headers in ({}, {"Authorization": "Bearer not-a-configured-key-at-all"}):
                response = await http.post(
                    "/mcp",
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                    headers={**headers, "Accept": "application/json, text/event-stream"},
                )
                assert response.status_code == 401
                assert response.json()["error"]["type"] == "unauthenticated"
                assert "not-a-configured" not in response.text


@pytest.mark.parametrize("path", ["/mcp", "/mcp/some-bank"])
async def test_without_the_lifespan_the_endpoint_says_so(stack, path):
    bare = create_app(service=stack.service, auth=None, limits=ApiLimits())
    transport = httpx.ASGITransport(app=bare)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
        response = await http.post(path, json={})
    assert response.status_code == 503 and "lifespan" in response.json()["error"]["message"]


async def test_the_host_guard_in_front_of_the_app_covers_mcp(stack, banks):
    keyless = create_app(service=stack.service, auth=None, limits=ApiLimits())
    guarded = HostGuardMiddleware(keyless, guard=HostGuard())
    async with keyless.router.lifespan_context(keyless):
        transport = httpx.ASGITransport(app=guarded)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
            refused = await http.post("/mcp", json={}, headers={"Host": "evil.example"})
        assert refused.status_code == 421
        async with http_session(BASE, "/mcp", None, httpx2.ASGITransport(app=guarded)) as session:
            assert len((await session.list_tools()).tools) == len(TOOLS)
