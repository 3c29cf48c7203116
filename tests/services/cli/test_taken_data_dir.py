"""A data directory that a live `cogsub run` serves is refused at once, before anything answers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cogsub.core.errors import ConfigurationError
from cogsub.sdk import MemoryClient

# The console script as a user runs it (`-m cogsub.cli.main` adds a runpy warning of its own).
COGSUB = [str(Path(sys.executable).parent / "cogsub"), "--embedder", "hash"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    """A `cogsub run` serving a fresh data directory on a free loopback port; stopped by PID."""
    root = tmp_path_factory.mktemp("served")
    data, log = root / "data", root / "run.log"
    env = {**os.environ, "COGSUB_API__PORT": "0", "COGSUB_API__HOST": "127.0.0.1"}
    with log.open("wb") as out:
        owner = subprocess.Popen(
            [*COGSUB, "--data-dir", str(data), "run", "--no-samples"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while b"API on" not in log.read_bytes():
            assert owner.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield data, owner.pid
    finally:
        owner.send_signal(signal.SIGINT)
        try:
            owner.wait(timeout=30)
        except subprocess.TimeoutExpired:
            owner.kill()
            owner.wait(timeout=10)


@pytest.mark.timeout(120)
def test_a_second_run_fails_first_with_one_line_and_no_api_banner(
    served: tuple[Path, int],
) -> None:
    data, owner_pid = served
    env = {**os.environ, "COGSUB_API__PORT": "0", "COGSUB_API__HOST": "127.0.0.1"}
    second = subprocess.run(
        [*COGSUB, "--data-dir", str(data), "run", "--no-samples"],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert second.returncode != 0
    assert "API on" not in second.stdout + second.stderr
    assert "Traceback" not in second.stderr
    assert "never retrieved" not in second.stderr
    problem = second.stderr.strip()
    assert "\n" not in problem
    assert problem.startswith("cogsub: data directory")
    assert "in use by another process" in problem
    assert f"pid {owner_pid}" in problem


@pytest.mark.timeout(120)
def test_an_embedded_client_on_a_served_directory_is_refused_at_open(
    served: tuple[Path, int],
) -> None:
    data, owner_pid = served
    with pytest.raises(ConfigurationError) as refused:
        MemoryClient.embedded(data, embedder="hash").close()
    assert "in use by another process" in str(refused.value)
    assert f"pid {owner_pid}" in str(refused.value)
