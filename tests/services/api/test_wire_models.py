"""One wire model per resource: the SDK sends where the API listens and reads what it answers.

Every request the SDK builds is matched against the real app's routes: the
same method and path, and the answer read with the very class the route
declares as its response model (not a look-alike that could drift).
"""

from __future__ import annotations

import re

import pytest
from fastapi.routing import APIRoute

from cogsub.api import ApiLimits, consolidation, create_app, lifecycle, memories, recall
from cogsub.core.text_blocks import TEXT_BLOCKS
from cogsub.sdk import AsyncMemoryClient, MemoryClient
from cogsub.sdk._base import Call, _BaseClient

BANK = "jane"
DOCUMENT = create_app(service=None, auth=None, limits=ApiLimits()).openapi()  # type: ignore[arg-type]
ROUTES = {
    route.operation_id: route
    for module in (memories, recall, consolidation, lifecycle)
    for route in module.router.routes
    if isinstance(route, APIRoute)
}
SDK = _BaseClient("http://127.0.0.1:1")


def _calls() -> dict[str, Call[object]]:  # type: ignore[type-var]
    blocks = {
        block.operation_id: SDK._text_block_call(
            kind, BANK, "text", tags=None, memory_id=None, wait=False
        )
        for kind, block in TEXT_BLOCKS.items()
    }
    return {
        "retain": SDK._retain_call(
            BANK, "text", None, None, None, None, memory_id=None, wait=False
        ),
        "retainProcedure": SDK._procedure_call(
            BANK, ["a"], None, supersedes=None, tags=None, memory_id=None, wait=False
        ),
        **blocks,
        "recall": SDK._recall_call(
            BANK,
            "query",
            None,
            5,
            None,
            tags=None,
            since=None,
            until=None,
            prefer_observations=False,
            session_id=None,
            all_versions=False,
        ),
        "getMemory": SDK._get_memory_call(BANK, "m1"),
        "consolidate": SDK._consolidate_call(BANK),
        "feedback": SDK._feedback_call(BANK, ["m1"], "used"),
        "forget": SDK._forget_call(BANK, "m1"),
        "forgetBank": SDK._forget_bank_call(BANK, BANK),
        "importBank": SDK._import_call(BANK, "{}"),
    }


CALLS = _calls()


@pytest.mark.parametrize("operation", sorted(CALLS))
def test_the_sdk_calls_the_route_and_reads_its_response_model(operation: str) -> None:
    call, route = CALLS[operation], ROUTES[operation]

    assert route.methods == {call.method}
    assert route.path.format(bank_id=BANK, memory_id="m1") == call.path
    assert call.result is route.response_model
    published = DOCUMENT["paths"][route.path][call.method.lower()]
    assert published["operationId"] == operation


def test_every_text_block_route_is_the_tables() -> None:
    block_routes = [r for r in ROUTES.values() if r.endpoint.__name__ == "retain_block"]

    assert sorted(r.operation_id or "" for r in block_routes) == sorted(
        b.operation_id for b in TEXT_BLOCKS.values()
    )
    for block in TEXT_BLOCKS.values():
        route = ROUTES[block.operation_id]
        assert route.path == f"/v1/banks/{{bank_id}}/{block.resource}"
        assert route.summary == block.summary


@pytest.mark.parametrize("client", [MemoryClient, AsyncMemoryClient])
def test_both_clients_have_a_helper_per_text_block(client: type) -> None:
    for block in TEXT_BLOCKS.values():
        helper = re.sub(r"(?<!^)(?=[A-Z])", "_", block.operation_id).lower()
        assert callable(getattr(client, helper)), helper
