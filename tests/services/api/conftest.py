"""The real API app over a live embedded stack (hash embedder), reached through ASGITransport."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from cogsub.api import ApiKeys, ApiLimits, create_app
from cogsub.api.deps import Readiness
from cogsub.recall import MemoryService
from tests.services.recall.stack import LiveStack, live_stack

KEY_A = "key-for-bank-a-0123456789"
KEY_B = "key-for-bank-b-0123456789"
KEY_ALL = "key-for-every-bank-0123456789"
SMALL_BODY = 4_096

AppClient = Callable[..., httpx.AsyncClient]


@pytest.fixture
async def stack(data_dir: Path) -> AsyncIterator[LiveStack]:
    async with live_stack(data_dir) as running:
        yield running


@pytest.fixture
def banks(unique_name: str) -> tuple[str, str]:
    return f"{unique_name}-a", f"{unique_name}-b"


@pytest.fixture
def keys(banks: tuple[str, str]) -> ApiKeys:
    bank_a, bank_b = banks
    return ApiKeys({KEY_A: [bank_a], KEY_B: [bank_b], KEY_ALL: ["*"]})


@pytest.fixture
async def app_client(stack: LiveStack) -> AsyncIterator[AppClient]:
    """Builds an in-process HTTP client of a freshly wired app; all are closed at the end."""
    opened: list[httpx.AsyncClient] = []

    def make(
        *,
        auth: ApiKeys | None = None,
        max_body_bytes: int = SMALL_BODY,
        service: MemoryService | None = None,
        readiness: Readiness | None = None,
        key: str | None = None,
    ) -> httpx.AsyncClient:
        app = create_app(
            service=service or stack.service,
            auth=auth,
            limits=ApiLimits(max_body_bytes=max_body_bytes, readiness_timeout_s=1.0),
            readiness=readiness,
        )
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://api", headers=headers
        )
        opened.append(client)
        return client

    yield make
    for client in opened:
        await client.aclose()


def assert_error(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    """The response is a JSON error body of ``kind``, with no trace of a traceback."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert "Traceback" not in response.text
    error = response.json()["error"]
    assert error["type"] == kind
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["problems"], list)
    return error  # type: ignore[no-any-return]
