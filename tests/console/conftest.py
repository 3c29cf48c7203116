"""A real chromium (Debian's, through Playwright) against a `cogsub run` this suite starts.

Every server is a child process stopped by its PID. Every page records each request it
makes and each script error and security-policy report; a test fails if any request left
for another host. ``COGSUB_TEST_REQUIRE_BROWSER=1`` (set by ``make test``) turns a missing
chromium into a failure instead of a skip; ``COGSUB_TEST_SCREENSHOTS=DIR`` saves the
pages the tests reach as PNGs (``make console-screenshots``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

# Debian's chromium first; a CI image may name its build chromium-browser or ship Chrome.
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
START_TIMEOUT_S = 45.0
STOP_TIMEOUT_S = 20.0
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def _chromium() -> str | None:
    """The system browser: ``COGSUB_TEST_CHROMIUM``, else the first of BROWSER_NAMES found."""
    named = os.environ.get("COGSUB_TEST_CHROMIUM")
    if named:
        return shutil.which(named)
    return next((found for name in BROWSER_NAMES if (found := shutil.which(name))), None)


def _browser_missing() -> str | None:
    if _chromium() is None:
        wanted = os.environ.get("COGSUB_TEST_CHROMIUM") or " / ".join(BROWSER_NAMES)
        return f"no browser found ({wanted}); make setup-browser installs chromium"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (the dev extra pins it)"
    return None


# Module-scoped: Playwright's sync driver runs an event loop in this thread while it is open,
# which the suite's async tests (pytest-asyncio) must not find still running.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = _browser_missing()
    if missing is not None:
        if os.environ.get("COGSUB_TEST_REQUIRE_BROWSER") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=_chromium(), args=LAUNCH_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class ConsoleServer:
    """A running `cogsub run`: its base URL, PID and data directory."""

    url: str
    pid: int
    data_dir: Path
    operator_key: str | None = None

    def client(self, key: str | None = None) -> httpx.Client:
        key = key or self.operator_key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    return {**env, "COGSUB_LOG_FORMAT": "json", **extra}


@contextmanager
def running_console(
    data_dir: Path, log: Path, env: dict[str, str] | None = None, operator_key: str | None = None
) -> Iterator[ConsoleServer]:
    """`cogsub run --port 0 --embedder hash` until the block ends, then stopped by its PID."""
    command = [sys.executable, "-m", "cogsub.cli.main", "--data-dir", str(data_dir)]
    command += ["--embedder", "hash", "run", "--no-samples", "--port", "0"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=_child_env(env or {}), stdout=out, stderr=out)
    try:
        url = _announced_url(data_dir, process, log)
        yield ConsoleServer(url, process.pid, data_dir, operator_key)
    finally:
        _stop(process)


def _announced_url(data_dir: Path, process: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"cogsub run exited with {process.returncode}:\n{log.read_text()}")
        try:
            # `cogsub run` names its API in DATA_DIR/api.json once it serves.
            return str(json.loads((data_dir / "api.json").read_text())["url"])
        except (OSError, ValueError, KeyError):
            time.sleep(0.1)
    raise AssertionError(f"cogsub run did not serve within {START_TIMEOUT_S} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.kill(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_TIMEOUT_S)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleServer]:
    """One keyless loopback server for a module (tests use banks of their own)."""
    root = tmp_path_factory.mktemp("console")
    (root / "data").mkdir()
    with running_console(root / "data", root / "run.log") as running:
        yield running


@dataclass
class Recorded:
    """What a page did that a test checks afterwards."""

    requests: list[str] = field(default_factory=list)
    responses: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class ConsolePage:
    """A browser tab on the console, waiting for each render the router finishes."""

    def __init__(self, page: Any, url: str, recorded: Recorded) -> None:
        self.page = page
        self.url = url
        self.recorded = recorded

    def _turn(self) -> str:
        return str(self.page.evaluate("document.body.dataset.ready || ''"))

    def rendered_after(self, action: Callable[[], None]) -> None:
        """Run ``action`` and wait until the router has drawn the page it leads to."""
        before = self._turn()
        action()
        self.page.wait_for_function(
            "before => (document.body.dataset.ready || '') !== before", arg=before
        )

    def open(self, route: str) -> None:
        if self.page.url.startswith(f"{self.url}/ui/"):
            self.rendered_after(lambda: self.page.evaluate(f"location.hash = {route!r}"))
        else:
            self.page.goto(f"{self.url}/ui/{route}")
            self.page.wait_for_function("() => document.body.dataset.ready")

    def shoot(self, name: str) -> None:
        """Save the page as docs' screenshot ``name`` when asked to (COGSUB_TEST_SCREENSHOTS)."""
        folder = os.environ.get("COGSUB_TEST_SCREENSHOTS")
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


@pytest.fixture
def console(browser: Any) -> Iterator[Callable[..., ConsolePage]]:
    """Opens console tabs; on teardown fails on any foreign request or page error."""
    opened: list[tuple[Any, str, Recorded]] = []

    def make(
        server: ConsoleServer, viewport: dict[str, int] = DESKTOP, dark: bool = False
    ) -> ConsolePage:
        context = browser.new_context(
            viewport=viewport, color_scheme="dark" if dark else "light", service_workers="block"
        )
        recorded = Recorded()
        context.on("request", lambda request: recorded.requests.append(request.url))
        page = context.new_page()
        page.on("pageerror", lambda error: recorded.errors.append(str(error)))
        page.on("console", lambda m: _policy_report(m.text, recorded))
        opened.append((context, server.url, recorded))
        return ConsolePage(page, server.url, recorded)

    yield make
    for context, url, recorded in opened:
        context.close()
        own = urlsplit(url).netloc
        foreign = [u for u in recorded.requests if _host_of(u) not in (own, None)]
        assert not foreign, f"the console reached other hosts: {foreign}"
        assert not recorded.errors, f"script errors or policy reports: {recorded.errors}"


def _host_of(url: str) -> str | None:
    parts = urlsplit(url)
    # data: URLs (the empty favicon) go nowhere; every other scheme names a host.
    return None if parts.scheme == "data" else parts.netloc


def _policy_report(text: str, recorded: Recorded) -> None:
    if "Content Security Policy" in text or "Refused to" in text:
        recorded.errors.append(text)
