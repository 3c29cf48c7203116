"""Over stdio, ``list_banks`` is offered as over HTTP: only to a caller of several banks."""

from __future__ import annotations

import httpx

from cogsub.api import ApiLimits, create_app
from cogsub.core.events import FactType
from cogsub.core.memory import RetainRequest
from cogsub.mcp import ProcessCallers
from cogsub.sdk import AsyncMemoryClient
from tests.services.mcp.conftest import KEY_A, KEY_ALL, running_app
from tests.services.recall.stack import LiveStack

BASE = "http://127.0.0.1"


def _client(app: object, key: str | None) -> AsyncMemoryClient:
    return AsyncMemoryClient(BASE, api_key=key, transport=httpx.ASGITransport(app=app))  # type: ignore[arg-type]


async def _offered(app: object, key: str | None, *, bank: str | None = None) -> bool:
    async with _client(app, key) as client:
        return (await ProcessCallers.asking(client, bank=bank)).several_banks(None)


async def _fill(stack: LiveStack, *banks: str) -> None:
    for bank in banks:
        retained = RetainRequest(content="Staging first.", fact_type=FactType.WORLD, wait=True)
        await stack.service.retain(bank, retained)


async def test_a_key_of_one_bank_is_not_offered_list_banks(stack, banks):
    await _fill(stack, *banks)
    async with running_app(stack, banks) as app:
        assert await _offered(app, KEY_A) is False
        assert await _offered(app, KEY_ALL) is True
        assert await _offered(app, KEY_ALL, bank=banks[0]) is False  # pinned: never
        assert await _offered(app, None) is False  # refused (401): nothing to list


async def test_a_star_key_sees_one_bank_as_one_until_a_second_exists(stack, banks):
    await _fill(stack, banks[0])
    async with running_app(stack, banks) as app:
        assert await _offered(app, KEY_ALL) is False
        await _fill(stack, banks[1])
        assert await _offered(app, KEY_ALL) is True


async def test_without_keys_every_bank_is_open_even_before_any_exists(stack):
    app = create_app(service=stack.service, auth=None, limits=ApiLimits())
    assert await _offered(app, None) is True
