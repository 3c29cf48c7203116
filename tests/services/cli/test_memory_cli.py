"""`cogsub retain/recall/serve/run` as a user runs them: in-process and over `cogsub run`."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from cogsub.cli import main

COGSUB = [sys.executable, "-m", "cogsub.cli.main"]


def _cli(data_dir: Path, *args: str) -> list[str]:
    return ["--data-dir", str(data_dir), "--embedder", "hash", *args]


def test_retain_then_recall_in_process(
    data_dir: Path, unique_name: str, capsys: pytest.CaptureFixture[str]
):
    text = "For day-planning, use personal Gmail, never work mail."
    code = main(_cli(data_dir, "retain", unique_name, text, "--type", "preference", "--json"))
    captured = capsys.readouterr()
    assert code == 0
    assert "running the embedded stack here" in captured.err
    result = json.loads(captured.out)
    assert result["fact_type"] == "preference"
    assert result["recallable"] is True  # in-process retain always waits

    assert main(_cli(data_dir, "recall", unique_name, "which mail for planning", "--json")) == 0
    response = json.loads(capsys.readouterr().out)
    assert [h["text"] for h in response["results"]] == [text]

    assert main(_cli(data_dir, "recall", unique_name, "which mail", "--types", "preference")) == 0
    table = capsys.readouterr().out
    assert "Gmail" in table and "preference" in table
    assert re.search(r"│ 1 │ \d\.\d{3} │ preference", table)  # rank, score, type


def test_recall_filters_by_type_and_budget(
    data_dir: Path, unique_name: str, capsys: pytest.CaptureFixture[str]
):
    kept = [("Acme HQ is in Berlin.", "world"), ("No — never deploy on Fridays.", "correction")]
    for text, kind in kept:
        assert main(_cli(data_dir, "retain", unique_name, text, "--type", kind)) == 0
    out = capsys.readouterr().out
    assert out.count("recallable") == 2
    args = ["recall", unique_name, "deploy Acme", "--types", "correction,preference", "--json"]
    assert main(_cli(data_dir, *args)) == 0
    hits = json.loads(capsys.readouterr().out)["results"]
    assert [h["fact_type"] for h in hits] == ["correction"]
    assert main(_cli(data_dir, "recall", unique_name, "Acme", "--max-tokens", "1", "--json")) == 0
    assert json.loads(capsys.readouterr().out)["results"] == []


def test_bad_types_are_a_usage_error(data_dir: Path, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exited:
        main(_cli(data_dir, "recall", "bank", "q", "--types", "procedure,nonsense"))
    assert exited.value.code == 2
    assert "choose from world" in capsys.readouterr().err


def test_serve_off_loopback_without_keys_refuses_to_start(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
):
    assert main(_cli(data_dir, "serve", "--host", "0.0.0.0", "--port", "0")) == 1
    assert "COGSUB_API__KEYS" in capsys.readouterr().err


def test_an_explicit_url_that_is_down_is_an_error(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
):
    args = ["recall", "bank", "q", "--url", "http://127.0.0.1:9"]
    assert main(_cli(data_dir, *args)) == 1
    assert "cannot reach the memory API" in capsys.readouterr().err


def test_plugin_modules_are_registered_and_dispatched(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    main_module = importlib.import_module("cogsub.cli.main")
    plugins = ("tests.services.cli._plugin_example", "cogsub_absent_plugin")
    monkeypatch.setattr(main_module, "PLUGIN_MODULES", plugins)
    assert main(_cli(data_dir, "hello", "world")) == 7
    assert "hello world from data" in capsys.readouterr().out


def test_the_eval_command_is_registered_when_its_module_exists(
    capsys: pytest.CaptureFixture[str],
):
    if importlib.util.find_spec("cogsub.cli.eval") is None:
        pytest.skip("cogsub.cli.eval is not installed")
    with pytest.raises(SystemExit) as exited:
        main(["eval", "--help"])
    assert exited.value.code == 0
    assert "locomo" in capsys.readouterr().out


def _wait_for_api(data_dir: Path, process: subprocess.Popen[bytes], timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"cogsub run exited early with {process.returncode}")
        try:
            return str(json.loads((data_dir / "api.json").read_text())["url"])
        except (OSError, ValueError, KeyError):
            time.sleep(0.1)  # the process announces itself only through this file
    raise AssertionError("cogsub run did not start serving in time")


@pytest.mark.timeout(60)
def test_run_serves_the_api_and_the_cli_uses_it(
    data_dir: Path, unique_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    env = {**os.environ, "COGSUB_LOG_FORMAT": "json", "COGSUB_API__PORT": "0"}
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*COGSUB, *_cli(data_dir, "run", "--no-samples")], env=env, stdout=out, stderr=out
        )
    try:
        url = _wait_for_api(data_dir, process, 30)
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{url}/readyz", timeout=5).json() == {"status": "ok"}
        text = "Has admin on AWS, GitHub, and Grafana."
        args = ["retain", unique_name, text, "--type", "profile", "--wait", "--json"]
        assert main(_cli(data_dir, *args)) == 0
        captured = capsys.readouterr()
        assert f"using the API at {url}" in captured.err
        assert json.loads(captured.out)["recallable"] is True
        assert main(_cli(data_dir, "recall", unique_name, "what can the user access?")) == 0
        captured = capsys.readouterr()
        assert "Grafana" in captured.out and f"using the API at {url}" in captured.err
        process.send_signal(signal.SIGINT)  # Ctrl-C: the API and the worker stop together
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    output = log.read_text()
    assert f"API on {url}" in output and "stopped;" in output
    assert not (data_dir / "api.json").exists()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/healthz", timeout=2)
