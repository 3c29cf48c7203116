"""Safe defaults of the HTTP API: loopback Host names only without keys, an operator
key for ``/metrics`` with keys, and ``/docs`` that needs no network.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from cogsub.api import ApiKeys, ApiLimits, ApiServer, create_app
from cogsub.api.auth import HostGuard, host_name
from cogsub.runtime.settings import Settings
from cogsub.telemetry.metrics import EXPOSITION_CONTENT_TYPE, Metrics
from tests.services.api.conftest import KEY_A, KEY_ALL, assert_error
from tests.services.recall.stack import LiveStack

COGSUB = [sys.executable, "-m", "cogsub.cli.main"]
LOOPBACK_HOSTS = [
    "localhost",
    "LOCALHOST.",
    "localhost:8470",
    "app.localhost:8470",
    "127.0.0.1",
    "127.0.0.1:8470",
    "127.8.9.10",
    "[::1]",
    "[::1]:8470",
]
FOREIGN_HOSTS = [
    "evil.example",
    "evil.example:8470",
    "127.0.0.1.evil.example",
    "localhost.evil.example",
    "evillocalhost",
    "10.0.0.5:8470",
    "0.0.0.0",
    "[::2]:8470",
    "",
]


@pytest.mark.parametrize("host", LOOPBACK_HOSTS)
def test_loopback_names_and_addresses_are_admitted(host: str) -> None:
    assert HostGuard().admits(host)


@pytest.mark.parametrize("host", FOREIGN_HOSTS)
def test_other_names_are_refused_unless_listed(host: str) -> None:
    assert not HostGuard().admits(host)
    assert HostGuard(["*"]).admits(host)
    if host:
        assert HostGuard([host_name(host).upper()]).admits(host)


def test_no_host_header_is_refused() -> None:
    assert not HostGuard().admits(None)
    assert not HostGuard(["evil.example"]).admits(None)


def test_only_a_keyless_loopback_api_is_guarded(keys: ApiKeys) -> None:
    assert HostGuard.for_api("127.0.0.1", None, []) is not None
    assert HostGuard.for_api("::1", None, []) is not None
    assert HostGuard.for_api("127.0.0.1", keys, []) is None  # a rebound page has no key
    assert HostGuard.for_api("0.0.0.0", None, []) is None  # require_keys=false, chosen openly


def test_extra_hosts_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COGSUB_API__ALLOWED_HOSTS", '["box.lan", "api.internal"]')
    assert Settings().api.allowed_hosts == ["box.lan", "api.internal"]
    monkeypatch.delenv("COGSUB_API__ALLOWED_HOSTS")
    assert Settings().api.allowed_hosts == []


@pytest.fixture
async def served(stack: LiveStack) -> AsyncIterator[str]:
    """A keyless API on a loopback socket, guarded as `cogsub serve` guards it."""
    app = create_app(service=stack.service, auth=None, limits=ApiLimits())
    guard = HostGuard.for_api("127.0.0.1", None, ["box.lan"])
    server = ApiServer(app, host="127.0.0.1", port=0, host_guard=guard)
    await server.start()
    try:
        yield server.url
    finally:
        await server.stop()


async def test_a_keyless_loopback_socket_answers_loopback_hosts_only(served: str) -> None:
    async with httpx.AsyncClient(base_url=served, trust_env=False, timeout=10) as client:
        assert (await client.get("/healthz")).status_code == 200  # Host: 127.0.0.1:port
        for host in [*LOOPBACK_HOSTS, "box.lan", "box.lan:80"]:
            response = await client.get("/healthz", headers={"Host": host})
            assert response.status_code == 200, (host, response.text)
        refused = await client.get("/v1/banks/b/memories/m", headers={"Host": "evil.example"})
    error = assert_error(refused, 421, "misdirected_request")
    assert "'evil.example'" in error["message"] and "DNS rebinding" in error["message"]
    assert "COGSUB_API__ALLOWED_HOSTS" in error["message"]
    assert error["problems"][0]["field"] == "Host"


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_cogsub_serve_refuses_a_rebound_host(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {**os.environ, "COGSUB_API__PORT": "0", "COGSUB_LOG_FORMAT": "json"}
    env.pop("COGSUB_API__KEYS", None)
    cmd = [*COGSUB, "--data-dir", str(data), "--embedder", "hash", "serve"]
    with (tmp_path / "serve.log").open("wb") as log:
        serving = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = _served_url(data / "api.json", serving)
        port = httpx.URL(url).port
        with httpx.Client(base_url=url, trust_env=False, timeout=10) as client:
            rebound = client.get("/metrics", headers={"Host": f"evil.example:{port}"})
            assert rebound.status_code == 421, rebound.text
            assert client.get("/metrics", headers={"Host": f"localhost:{port}"}).status_code == 200
        serving.send_signal(signal.SIGINT)
        assert serving.wait(timeout=30) == 0
    finally:
        if serving.poll() is None:
            serving.kill()
            serving.wait(timeout=10)


def _served_url(api_file: Path, serving: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and serving.poll() is None:
        if api_file.exists():
            return str(json.loads(api_file.read_text())["url"])
        time.sleep(0.2)
    raise AssertionError("cogsub serve did not start serving")


def _metrics_client(stack: LiveStack, auth: ApiKeys | None, key: str | None) -> httpx.AsyncClient:
    app = create_app(service=stack.service, auth=auth, limits=ApiLimits(), metrics=Metrics())
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://api", headers=headers)


async def test_metrics_need_an_operator_key_when_keys_are_configured(
    stack: LiveStack, keys: ApiKeys
) -> None:
    async with _metrics_client(stack, keys, None) as client:
        assert_error(await client.get("/metrics"), 401, "unauthenticated")
    async with _metrics_client(stack, keys, "not-a-configured-key-0123") as client:
        assert_error(await client.get("/metrics"), 401, "unauthenticated")
    async with _metrics_client(stack, keys, KEY_A) as client:  # one bank's key sees one bank
        assert_error(await client.get("/metrics"), 403, "forbidden")
    async with _metrics_client(stack, keys, KEY_ALL) as client:
        answered = await client.get("/metrics")
        assert answered.status_code == 200
        assert answered.headers["content-type"] == EXPOSITION_CONTENT_TYPE


async def test_metrics_need_no_key_when_no_keys_are_configured(stack: LiveStack) -> None:
    async with _metrics_client(stack, None, None) as client:
        assert (await client.get("/metrics")).status_code == 200


class _References(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found += [value for name, value in attrs if name in ("src", "href") and value]


async def test_docs_load_every_asset_from_this_server(stack: LiveStack) -> None:
    app = create_app(service=stack.service, auth=None, limits=ApiLimits())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        page = await client.get("/docs")
        assert page.status_code == 200
        references = _References()
        references.feed(page.text)
        script_urls = re.findall(r"""url:\s*['"]([^'"]+)['"]""", page.text)
        assert script_urls == ["/openapi.json"]
        assert len(references.found) >= 3  # the script, the stylesheet and the icon
        assert "http://" not in page.text and "https://" not in page.text
        for url in [*references.found, *script_urls]:
            assert url.startswith("/") and not url.startswith("//"), url
            asset = await client.get(url)
            assert asset.status_code == 200 and asset.content, url
            if url.endswith(".css"):
                assert not re.search(r"url\(\s*['\"]?(https?:)?//", asset.text), url
