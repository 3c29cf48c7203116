"""`cogsub mcp` over stdio and `cogsub run`'s /mcp over HTTP, as an MCP host reaches them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.services.mcp.conftest import KEY_A, KEY_ALL, failed, http_session, succeeded

COGSUB = [sys.executable, "-m", "cogsub.cli.main"]


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_stdio_server_embedded_serves_every_tool_and_keeps_stdout_for_the_protocol(
    data_dir: Path, unique_name: str, tmp_path: Path
):
    errors = tmp_path / "stderr.log"
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cogsub.cli.main", "--data-dir", str(data_dir), "--embedder", "hash", "mcp"],
        env={"COGSUB_LOG_FORMAT": "json"},
    )
    with errors.open("w") as errlog:
        async with (
            stdio_client(server, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert {"retain_procedure", "context", "list_banks"} <= names
            steps = ["make build", "kubectl apply -f prod.yaml", "curl /health"]
            kept = succeeded(
                await session.call_tool(
                    "retain_procedure",
                    {"bank_id": unique_name, "steps": steps, "wait": True},
                )
            )
            found = succeeded(
                await session.call_tool(
                    "recall",
                    {"bank_id": unique_name, "query": "deploy", "types": ["procedure"]},
                )
            )
            assert [hit["id"] for hit in found["results"]] == [kept["memory_id"]]
            bad = failed(
                await session.call_tool("recall", {"bank_id": unique_name}), "invalid_input"
            )
            assert [p["field"] for p in bad["problems"]] == ["query"]
            succeeded(
                await session.call_tool(
                    "forget_memory", {"bank_id": unique_name, "memory_id": kept["memory_id"]}
                )
            )
    assert "running the embedded stack here" in errors.read_text()


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_http_mcp_of_cogsub_run_checks_keys_per_bank_and_stops_cleanly(
    data_dir: Path, unique_name: str, tmp_path: Path
):
    bank_a, bank_b = f"{unique_name}-a", f"{unique_name}-b"
    keys = {KEY_A: [bank_a], KEY_ALL: ["*"]}
    env = {
        **os.environ,
        "COGSUB_LOG_FORMAT": "json",
        "COGSUB_API__PORT": "0",
        "COGSUB_API__KEYS": json.dumps(keys),
    }
    log = tmp_path / "run.log"
    process = _start_run(data_dir, env, log)
    try:
        url = _wait_for_api(data_dir, process, 60)
        async with http_session(url, "/mcp", KEY_ALL) as owner:
            kept = succeeded(
                await owner.call_tool(
                    "retain_preference",
                    {"bank_id": bank_b, "text": "Use the staging cluster first.", "wait": True},
                )
            )
            banks = succeeded(await owner.call_tool("list_banks", {}))
            assert bank_b in {bank["bank_id"] for bank in banks["banks"]}
            report = succeeded(await owner.call_tool("consolidate", {"bank_id": bank_b}))
            assert report["bank_id"] == bank_b
        async with http_session(url, f"/mcp/{bank_a}", KEY_A) as pinned:
            succeeded(await pinned.call_tool("retain", {"content": "A's note", "wait": True}))
        async with http_session(url, "/mcp", KEY_A) as session:
            refused = await session.call_tool(
                "get_memory", {"bank_id": bank_b, "memory_id": kept["memory_id"]}
            )
            assert "Use the staging" not in str(refused.content)
            failed(refused, "forbidden")
        await _stdio_against(url, bank_a, bank_b)
        process.send_signal(signal.SIGINT)  # the MCP session manager stops with the app
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    output = log.read_text()
    assert "stopped;" in output and "Traceback" not in output


def _start_run(data_dir: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    command = [*COGSUB, "--data-dir", str(data_dir), "--embedder", "hash", "run", "--no-samples"]
    with log.open("wb") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=out)


def _wait_for_api(data_dir: Path, process: subprocess.Popen[bytes], timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"cogsub run exited early with {process.returncode}")
        try:
            return str(json.loads((data_dir / "api.json").read_text())["url"])
        except (OSError, ValueError, KeyError):
            time.sleep(0.1)  # the process announces its port only through this file
    raise AssertionError("cogsub run did not start serving in time")


async def _stdio_against(url: str, bank_a: str, bank_b: str) -> None:
    """`cogsub mcp --url URL --bank B` with the key from COGSUB_API_KEY: the API's own refusals."""
    for bank, outcome in ((bank_a, None), (bank_b, "forbidden")):
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "cogsub.cli.main", "mcp", "--url", url, "--bank", bank],
            env={"COGSUB_LOG_FORMAT": "json", "COGSUB_API_KEY": KEY_A},
        )
        async with (
            stdio_client(server, errlog=sys.stderr) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("recall", {"query": "note"})
            if outcome is None:
                assert "A's note" in str(succeeded(result)["results"])
            else:
                failed(result, outcome)
