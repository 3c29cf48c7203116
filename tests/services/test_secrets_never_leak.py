"""Secrets (API keys, S3 keys, LLM and embedding keys) never reach a log, a span or an error.

Distinctive secrets are configured; then settings are printed and dumped, the
API refuses keys, banks and bad input, and the LLM extractor, the OpenAI
embedder and the S3 archive fail against closed loopback ports and against
servers that answer 401 (echoing the key back, as OpenAI does). Everything a
reader could see is captured: structlog's JSON output, stdlib logging at DEBUG
(botocore, httpx and httpcore included), finished spans with their exception
events, exception messages with their whole cause chain, and HTTP error bodies
and headers. None of it may contain a secret.
"""

from __future__ import annotations

import io
import json
import logging
import socket
import traceback
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cogsub.api import ApiKeys, ApiLimits, create_app
from cogsub.archive.s3 import S3Archive, S3Retries
from cogsub.core.errors import CogsubError, ConfigurationError, UnavailableError
from cogsub.core.events import EventType
from cogsub.embeddings.openai import OpenAIEmbedder
from cogsub.extraction import ExtractionInput, LLMExtractor
from cogsub.runtime.settings import Settings
from cogsub.telemetry import configure_logging, tracer
from tests.fixtures.chat_server import ChatServer
from tests.fixtures.embedding_server import EmbeddingServer
from tests.services.recall.stack import live_stack

API_KEY = "cogsub-api-key-SECRET-3f9c2a7b1e"
S3_SECRET = "s3-secret-SECRET-8d1e4c7a0b"
OPENAI_KEY = "sk-embed-SECRET-5b2e9f1c3d"
LLM_KEY = "sk-llm-SECRET-7a4c1e8b2f"
OPENSEARCH_PASSWORD = "os-pass-SECRET-0c3f6a9d2e"
SECRETS = (API_KEY, S3_SECRET, OPENAI_KEY, LLM_KEY, OPENSEARCH_PASSWORD)
ENVIRONMENT = {
    "COGSUB_API__HOST": "0.0.0.0",
    "COGSUB_API__KEYS": json.dumps({API_KEY: ["bank-a"]}),
    "COGSUB_API__CLIENT_KEY": API_KEY,
    "COGSUB_S3__ACCESS_KEY_ID": "AKIDCOGSUBTEST",
    "COGSUB_S3__SECRET_ACCESS_KEY": S3_SECRET,
    "COGSUB_EMBEDDER__OPENAI_API_KEY": OPENAI_KEY,
    "COGSUB_CONSOLIDATION__LLM_API_KEY": LLM_KEY,
    "COGSUB_OPENSEARCH__PASSWORD": OPENSEARCH_PASSWORD,
}
ITEM = ExtractionInput(
    source_event_id="evt-secret-test",
    text="Jane owns the billing service.",
    event_time=datetime(2026, 5, 8, 12, 0, tzinfo=UTC),
    event_type=EventType.USER_INPUT,
)
_STDLIB_FORMAT = logging.Formatter("%(name)s %(levelname)s %(message)s")


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@dataclass
class Sightings:
    """Everything a reader could see, and where it was seen."""

    structlog_output: io.StringIO
    caplog: pytest.LogCaptureFixture
    spans: InMemorySpanExporter
    texts: list[tuple[str, str]] = field(default_factory=list)

    def exception(self, where: str, exc: BaseException) -> None:
        """The message, the repr and the whole traceback with its cause and context chain."""
        self.texts.append((f"{where}: str", str(exc)))
        self.texts.append((f"{where}: repr", repr(exc)))
        self.texts.append((f"{where}: traceback", "".join(traceback.format_exception(exc))))

    def response(self, where: str, response: httpx.Response) -> None:
        self.texts.append((f"{where}: body", response.text))
        self.texts.append((f"{where}: headers", str(list(response.headers.items()))))

    def text(self, where: str, text: str) -> None:
        self.texts.append((where, text))

    def everything(self) -> Iterator[tuple[str, str]]:
        yield "structlog", self.structlog_output.getvalue()
        for record in self.caplog.records:
            yield f"stdlib {record.name}", _STDLIB_FORMAT.format(record)
        for span in self.spans.get_finished_spans():
            yield f"span {span.name}", span.to_json()
        yield from self.texts

    def where(self, needle: str) -> list[str]:
        return [where for where, text in self.everything() if needle in text]

    def assert_no_secret(self) -> None:
        leaks = {secret: self.where(secret) for secret in SECRETS}
        assert not any(leaks.values()), f"secrets seen: {leaks}"


@pytest.fixture
def seen(caplog: pytest.LogCaptureFixture, spans: InMemorySpanExporter) -> Iterator[Sightings]:
    """JSON structlog into a buffer, stdlib logging at DEBUG, spans; the setup is restored after."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    buffer = io.StringIO()
    configure_logging(format="json", level="debug", stream=buffer)
    caplog.set_level(logging.DEBUG)
    try:
        yield Sightings(buffer, caplog, spans)
    finally:
        structlog.configure(**saved)
        root.handlers[:] = handlers
        root.setLevel(level)


def test_the_capture_sees_each_place_a_secret_could_go(seen: Sightings) -> None:
    """The control: a canary put in every channel is found in every channel."""
    canary = "canary-SECRET-0000"
    structlog.get_logger("cogsub.test").info("canary_logged", value=canary)
    logging.getLogger("botocore.test").debug("value %s", canary)
    with tracer().start_as_current_span("canary", attributes={"value": canary}):
        pass
    with pytest.raises(KeyError), tracer().start_as_current_span("raising"):
        raise KeyError(canary)  # the span records the exception as an event
    try:
        try:
            raise KeyError(canary)
        except KeyError as inner:
            raise ValueError("outer") from inner
    except ValueError as exc:
        seen.exception("chained", exc)
    places = seen.where(canary)
    assert "structlog" in places and "stdlib botocore.test" in places
    assert "span canary" in places and "span raising" in places
    assert "chained: traceback" in places
    assert "chained: str" not in places


# -- settings ------------------------------------------------------------------------------------


def test_settings_repr_str_and_dumps_hide_the_configured_secrets(
    seen: Sightings, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.s3.secret_access_key is not None
    assert settings.s3.secret_access_key.get_secret_value() == S3_SECRET  # really configured
    for part in (settings, settings.api, settings.s3, settings.embedder, settings.consolidation):
        seen.text(f"repr {type(part).__name__}", repr(part))
        seen.text(f"str {type(part).__name__}", str(part))
    for section in (settings.s3, settings.embedder, settings.consolidation, settings.opensearch):
        seen.text(f"dump {type(section).__name__}", section.model_dump_json())
        seen.text(f"dict {type(section).__name__}", str(section.model_dump()))
    seen.assert_no_secret()


def test_a_dump_of_the_settings_hides_the_api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COGSUB_API__KEYS", ENVIRONMENT["COGSUB_API__KEYS"])
    settings = Settings()
    assert API_KEY not in settings.model_dump_json()
    assert API_KEY not in str(settings.model_dump())


@pytest.mark.parametrize("keys", [{API_KEY: "bank-a"}, {API_KEY: [1]}, [API_KEY]])
def test_a_malformed_keys_setting_never_echoes_the_key(
    monkeypatch: pytest.MonkeyPatch, keys: object
) -> None:
    monkeypatch.setenv("COGSUB_API__KEYS", json.dumps(keys))
    with pytest.raises(ValueError) as caught:  # pydantic's ValidationError is a ValueError
        Settings()
    assert API_KEY not in str(caught.value)


# -- the API -------------------------------------------------------------------------------------


class _Crashing:
    """A service whose recall fails in a way nobody planned for."""

    async def recall(self, bank_id: str, request: object) -> object:
        raise RuntimeError("the recall pipeline broke")


@pytest.fixture
async def api(data_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with live_stack(data_dir) as stack:
        app = create_app(
            service=stack.service, auth=ApiKeys({API_KEY: ["bank-a"]}), limits=ApiLimits()
        )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            yield client


async def test_api_refusals_never_echo_a_key_or_a_secret_sent_as_input(
    seen: Sightings, api: httpx.AsyncClient
) -> None:
    def bearer(key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    recall = "/v1/banks/bank-a/recall"
    wrong_keys = [f"{API_KEY}x", API_KEY[:-1], LLM_KEY, f"{S3_SECRET}-and-more"]
    for n, key in enumerate(wrong_keys):
        response = await api.post(recall, json={"query": "x"}, headers=bearer(key))
        assert response.status_code == 401
        seen.response(f"wrong key {n}", response)
    response = await api.post(
        "/v1/banks/bank-b/recall", json={"query": "x"}, headers=bearer(API_KEY)
    )
    assert response.status_code == 403
    seen.response("other bank", response)
    # Secrets pasted into fields of the wrong type: the refusal names fields, never values.
    body = {"query": "x", "k": API_KEY, "types": [S3_SECRET], "since": LLM_KEY, "tags": OPENAI_KEY}
    response = await api.post(recall, json=body, headers=bearer(API_KEY))
    assert response.status_code == 422
    assert {p["field"] for p in response.json()["error"]["problems"]} >= {"k", "types.0", "since"}
    seen.response("validation", response)
    response = await api.post(
        "/v1/banks/bank-a/memories",
        json={"content": "x", "memory_id": f"{OPENAI_KEY}/../x", "supersedes": f"..{LLM_KEY}"},
        headers=bearer(API_KEY),
    )
    assert response.status_code == 422
    seen.response("bad ids", response)
    response = await api.get("/v1/banks/bank-a/memories/x", headers=bearer(f"{API_KEY} {API_KEY}"))
    assert response.status_code == 401
    seen.response("two keys", response)
    seen.assert_no_secret()


async def test_a_crash_under_a_valid_key_logs_no_key(seen: Sightings) -> None:
    app = create_app(
        service=_Crashing(),  # type: ignore[arg-type]
        auth=ApiKeys({API_KEY: ["bank-a"]}),
        limits=ApiLimits(),
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        response = await client.post(
            "/v1/banks/bank-a/recall",
            json={"query": "x"},
            headers={"Authorization": f"Bearer {API_KEY}"},
        )
    assert response.status_code == 500
    seen.response("crash", response)
    assert "the recall pipeline broke" in seen.structlog_output.getvalue()  # it was logged
    seen.assert_no_secret()


# -- adapters failing: LLM, embeddings, S3 -------------------------------------------------------


async def _fails(seen: Sightings, where: str, call: Any) -> CogsubError:
    """Run ``call`` inside a span (which records the exception), capture what it raised."""
    try:
        with tracer().start_as_current_span(f"scenario {where}"):
            await call()
    except CogsubError as exc:
        seen.exception(where, exc)
        return exc
    raise AssertionError(f"{where} did not fail")


async def test_llm_extractor_failures_never_show_the_key(
    seen: Sightings, chat_server: ChatServer
) -> None:
    closed = LLMExtractor(
        f"http://127.0.0.1:{closed_port()}/v1",
        "gpt-4o-mini",
        api_key=LLM_KEY,
        max_attempts=2,
        backoff_base_s=0.01,
        timeout_s=2.0,
    )
    chat_server.reset(api_key="sk-the-right-one")
    refused = LLMExtractor(chat_server.api_url, "gpt-4o-mini", api_key=LLM_KEY, max_attempts=1)
    try:
        down = await _fails(seen, "llm closed port", lambda: closed.extract(ITEM))
        assert isinstance(down, UnavailableError)
        wrong = await _fails(seen, "llm 401", lambda: refused.extract(ITEM))
        assert isinstance(wrong, ConfigurationError) and "Incorrect API key" in str(wrong)
        seen.text("repr", repr(closed) + repr(refused))
    finally:
        await closed.close()
        await refused.close()
    (request,) = await chat_server.requests()
    assert request["authorization"] == f"Bearer {LLM_KEY}"  # sent, only never shown
    assert "extraction_request_retrying" in seen.structlog_output.getvalue()
    seen.assert_no_secret()


async def test_openai_embedder_failures_never_show_the_key(
    seen: Sightings, embedding_server: EmbeddingServer
) -> None:
    closed = OpenAIEmbedder(
        f"http://127.0.0.1:{closed_port()}",
        "text-embedding-3-small",
        api_key=OPENAI_KEY,
        dimension=8,
        max_retries=1,
        backoff_base_s=0.01,
        timeout_s=2.0,
    )
    embedding_server.reset(api_key="sk-the-right-one")
    refused = OpenAIEmbedder(
        embedding_server.base_url, "m", api_key=OPENAI_KEY, dimension=8, max_retries=0
    )
    try:
        down = await _fails(seen, "embedder closed port", lambda: closed.embed(["x"]))
        assert isinstance(down, UnavailableError)
        wrong = await _fails(seen, "embedder 401", lambda: refused.embed(["x"]))
        assert isinstance(wrong, ConfigurationError) and "Incorrect API key" in str(wrong)
        seen.text("repr", repr(closed) + repr(refused))
    finally:
        await closed.close()
        await refused.close()
    seen.assert_no_secret()


async def test_s3_failures_never_show_the_secret_key(seen: Sightings) -> None:
    archive = S3Archive(
        bucket="cogsub-secrets",
        endpoint_url=f"http://127.0.0.1:{closed_port()}",
        region="us-east-1",
        access_key_id="AKIDCOGSUBTEST",
        secret_access_key=S3_SECRET,
        retries=S3Retries(max_attempts=2, connect_timeout=1.0, read_timeout=1.0),
    )
    try:
        for name, call in [
            ("put", lambda: archive.put_once("events/a.json", b"{}")),
            ("get", lambda: archive.get("events/a.json")),
            ("bucket", archive.ensure_bucket),
        ]:
            failure = await _fails(seen, f"s3 {name}", call)
            assert isinstance(failure, UnavailableError)
        seen.text("repr", repr(archive))
    finally:
        await archive.close()
    assert any(r.name.startswith("botocore") for r in seen.caplog.records)  # DEBUG was on
    seen.assert_no_secret()


async def test_a_logged_traceback_never_shows_local_variables(seen: Sightings) -> None:
    """On a terminal, a logged exception must not print each frame's locals.

    httpx's ``post`` frame holds the request headers as a plain dict; a traceback
    renderer that shows locals (rich's default) would print the bearer key.
    """
    console = io.StringIO()
    configure_logging(format="console", level="debug", stream=console)
    closed = LLMExtractor(
        f"http://127.0.0.1:{closed_port()}/v1", "m", api_key=LLM_KEY, max_attempts=1
    )
    try:
        await closed.extract(ITEM)
    except UnavailableError:
        structlog.get_logger("cogsub.test").exception("extraction_failed")
    finally:
        await closed.close()
    output = console.getvalue()
    assert "extraction_failed" in output and "ConnectError" in output
    seen.text("console", output)
    seen.assert_no_secret()


def test_console_tracebacks_leave_out_every_frames_locals(seen: Sightings) -> None:
    console = io.StringIO()
    configure_logging(format="console", level="debug", stream=console)

    def sign(token: str) -> None:
        raise RuntimeError("signing failed")

    try:
        sign(API_KEY)
    except RuntimeError:
        structlog.get_logger("cogsub.test").exception("signing_failed")
    output = console.getvalue()
    assert "signing failed" in output and "sign" in output
    seen.text("console", output)
    seen.assert_no_secret()
