"""scripts/fleet_smoke.py: its parsing and checks, and a real run against ``cogsub run``.

The compose fleet needs Docker, which this machine lacks; the publish and recall steps run
here against the embedded stack, the Tempo step against a small Tempo-shaped HTTP server.
"""

from __future__ import annotations

import http.server
import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from scripts import fleet_smoke
from scripts.fleet_smoke import SmokeFailure

from cogsub.core.errors import UnavailableError
from cogsub.core.events import ExperienceEvent

COGSUB = [sys.executable, "-m", "cogsub.cli.main"]


def test_smoke_events_are_valid_events_of_one_fresh_bank() -> None:
    run = fleet_smoke.smoke_run("abc123", 3, datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    events = [ExperienceEvent.model_validate(event) for event in run.events]
    assert [e.event_id for e in events] == ["smoke-abc123-1", "smoke-abc123-2", "smoke-abc123-3"]
    assert {e.bank_id for e in events} == {run.bank_id} == {"smoke-abc123"}
    assert all("abc123" in e.input.text for e in events)  # the query's marker finds each
    assert run.events[0]["timestamp"] == "2026-01-02T03:04:05.000Z"
    with pytest.raises(ValueError, match="count must be at least 1"):
        fleet_smoke.smoke_run("x", 0, datetime.now(UTC))


def test_the_publish_summary_is_read_or_refused() -> None:
    assert fleet_smoke.publish_report("noise\naccepted 3, rejected 0\n") == (3, 0)
    assert fleet_smoke.publish_report("accepted 2, rejected 1\n  item 3: bad") == (2, 1)
    with pytest.raises(SmokeFailure, match="no 'accepted N, rejected M' line"):
        fleet_smoke.publish_report("Traceback: broker unreachable")


def test_traceql_quotes_the_event_id() -> None:
    assert fleet_smoke.traceql("e-1") == '{ span.cog.event.id = "e-1" }'
    assert fleet_smoke.traceql('a"b\\c') == '{ span.cog.event.id = "a\\"b\\\\c" }'


def test_span_names_are_found_in_either_trace_shape() -> None:
    span = {"traceId": "t", "spanId": "s1", "name": "experience.publish"}
    v1 = {"batches": [{"scopeSpans": [{"spans": [span]}]}]}
    v2 = {"trace": {"resourceSpans": [{"scopeSpans": [{"spans": [{**span, "spanId": "s2"}]}]}]}}
    assert fleet_smoke.span_names(v1) == fleet_smoke.span_names(v2) == {"experience.publish"}
    assert fleet_smoke.span_names({"name": "no span id"}) == set()
    assert fleet_smoke.trace_ids({"traces": [{"traceID": "a1"}, {"other": 1}]}) == ["a1"]
    assert fleet_smoke.trace_ids({"metrics": {}}) == []


def test_poll_names_the_step_and_the_last_error() -> None:
    def failing() -> None:
        raise httpx.ConnectError("refused")

    with pytest.raises(SmokeFailure, match=r"the step: not done in 0s \(ConnectError: refused\)"):
        fleet_smoke.poll("the step", failing, timeout_s=0)


def test_poll_waits_for_an_api_still_starting() -> None:
    """The SDK says an API not listening yet with UnavailableError: the next attempt may pass."""
    answers = iter([UnavailableError("cannot reach the memory API: refused"), "up"])

    def starting() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert fleet_smoke.poll("the step", starting, timeout_s=5) == "up"


def test_a_rejecting_publish_command_fails_the_step() -> None:
    run = fleet_smoke.smoke_run("r", 2, datetime.now(UTC))
    echo = [sys.executable, "-c", "print('accepted 1, rejected 1')"]
    with pytest.raises(SmokeFailure, match="publish: accepted 1, rejected 1"):
        fleet_smoke.publish(run, echo)
    with pytest.raises(SmokeFailure, match="exited 3"):
        fleet_smoke.publish(run, [sys.executable, "-c", "raise SystemExit(3)"])


@contextmanager
def tempo_like(traces: dict[str, dict[str, object]]) -> Iterator[str]:
    """An HTTP server answering Tempo's search and trace routes from ``traces`` by event id."""

    class Tempo(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/api/search":
                query = parse_qs(url.query)["q"][0]
                found = [tid for tid in traces if f'"{tid}"' in query]
                body: object = {"traces": [{"traceID": f"id-{tid}"} for tid in found]}
            else:
                body = traces[url.path.removeprefix("/api/traces/id-")]
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Tempo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _trace(*names: str) -> dict[str, object]:
    spans = [{"spanId": f"s{n}", "name": name} for n, name in enumerate(names)]
    return {"batches": [{"scopeSpans": [{"spans": spans}]}]}


def test_the_trace_step_needs_both_the_publish_and_the_ingest_span() -> None:
    full = _trace("experience.publish", "experience.ingest", "experience.embed")
    with tempo_like({"e1": full, "e2": _trace("experience.publish")}) as url:
        assert fleet_smoke.find_trace("e1", url, time.time(), timeout_s=5) >= {
            "experience.publish",
            "experience.ingest",
        }
        with pytest.raises(SmokeFailure, match="Tempo trace of e2"):
            fleet_smoke.find_trace("e2", url, time.time(), timeout_s=0)
        with pytest.raises(SmokeFailure, match="Tempo trace of e3"):
            fleet_smoke.find_trace("e3", url, time.time(), timeout_s=0)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_publish_and_recall_steps_pass_against_cogsub_run(tmp_path: Path) -> None:
    data, port = tmp_path / "data", _free_port()
    cli = [*COGSUB, "--data-dir", str(data), "--embedder", "hash"]
    env = {**os.environ, "COGSUB_API__PORT": str(port)}
    log = (tmp_path / "run.log").open("wb")
    process = subprocess.Popen([*cli, "run"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        args = ["--api-url", f"http://127.0.0.1:{port}", "--no-trace", "--timeout-s", "90"]
        args += ["--publish-cmd", shlex.join([*cli, "publish", "-"])]
        assert fleet_smoke.main(args) == 0, (tmp_path / "run.log").read_text()[-3000:]
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()
