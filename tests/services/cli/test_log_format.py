"""COGSUB_LOG_FORMAT=auto: console lines where a person reads them, JSON lines for machines."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

# The console script as a user runs it (`-m cogsub.cli.main` adds a runpy warning of its own).
COGSUB = [str(Path(sys.executable).parent / "cogsub"), "--embedder", "hash"]
LOGGED = "index_vectors_loaded"  # what the in-process recall logs when it opens a non-empty index


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory holding one memory, so that opening its index logs a line."""
    data = tmp_path_factory.mktemp("logs") / "data"
    retain = [*COGSUB, "--data-dir", str(data), "retain", "b", "Acme HQ is in Berlin.", "--wait"]
    subprocess.run(retain, check=True, capture_output=True, timeout=120)
    return data


def _recall(data: Path, *, stdout_tty: bool, stderr_tty: bool) -> tuple[str, str]:
    """Run `cogsub recall` with each stream on a pseudo-terminal or a pipe: (terminal, piped)."""
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [*COGSUB, "--data-dir", str(data), "recall", "b", "Acme"],
        stdin=subprocess.DEVNULL,
        stdout=secondary if stdout_tty else subprocess.PIPE,
        stderr=secondary if stderr_tty else subprocess.PIPE,
        env={**os.environ, "TERM": "xterm"},
    )
    os.close(secondary)
    shown = bytearray()
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(primary, 65536)
                except OSError:  # EIO: every holder of the terminal's other end has closed it
                    break
                if not chunk:
                    break
                shown += chunk
            elif process.poll() is not None and not (stdout_tty or stderr_tty):
                break
        out, err = process.communicate(timeout=30)
    finally:
        os.close(primary)
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert process.returncode == 0, (shown, err)
    piped = (out or b"") + (err or b"")
    return shown.decode(errors="replace"), piped.decode(errors="replace")


def _json_lines(text: str) -> list[dict[str, object]]:
    found = []
    for line in text.splitlines():
        try:
            value = json.loads(line.strip())
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


@pytest.mark.timeout(200)
@pytest.mark.parametrize(
    ("stdout_tty", "stderr_tty"),
    [(True, True), (True, False)],
    ids=["both-on-a-terminal", "stderr-captured-beside-a-terminal"],
)
def test_logs_are_console_lines_when_a_person_watches(
    kept: Path, stdout_tty: bool, stderr_tty: bool
) -> None:
    # Launchers and IDE consoles often pipe stderr onto the same screen as a terminal stdout.
    terminal, piped = _recall(kept, stdout_tty=stdout_tty, stderr_tty=stderr_tty)
    everything = terminal + piped
    assert LOGGED in everything
    assert _json_lines(everything) == []
    assert "Acme HQ is in Berlin." in terminal


@pytest.mark.timeout(200)
def test_logs_are_json_lines_when_no_terminal_is_attached(kept: Path) -> None:
    done = subprocess.run(
        [*COGSUB, "--data-dir", str(kept), "recall", "b", "Acme"],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    assert [line["event"] for line in _json_lines(done.stderr)] == [LOGGED]
