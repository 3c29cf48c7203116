"""The embedded SDK inside a user's script: its output is the script's own, and exit is clean."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

RETAIN_AND_RECALL = textwrap.dedent(
    """
    import sys
    import structlog
    from cogsub.sdk import MemoryClient

    if sys.argv[2] == "info":  # the program's own structlog setup is kept
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    with MemoryClient.embedded(sys.argv[1], embedder="hash") as cm:
        cm.retain("script-bank", "Acme HQ is in Berlin.", fact_type="world", wait=True)
        print(cm.recall("script-bank", "Where is Acme HQ?").results[0].text)
    """
)

NEVER_CLOSED = textwrap.dedent(
    """
    import sys
    from cogsub.sdk import MemoryClient

    cm = MemoryClient.embedded(sys.argv[1], embedder="hash")
    for i in range(int(sys.argv[2])):
        cm.retain("script-bank", f"Fact number {i} holds.", fact_type="world")
    print("done")
    """
)


def _script(tmp_path: Path, body: str, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.py"
    script.write_text(body)
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.timeout(300)
def test_a_script_prints_only_its_own_output_and_its_structlog_setup_is_kept(tmp_path: Path):
    data = str(tmp_path / "data")
    # The second and third opens find memories to load, which the index logs at info.
    for _ in range(2):
        quiet = _script(tmp_path, RETAIN_AND_RECALL, data, "default")
        assert quiet.returncode == 0, quiet.stderr
        assert quiet.stdout == "Acme HQ is in Berlin.\n"
        assert quiet.stderr == ""  # unconfigured logging shows warnings and errors only
    told = _script(tmp_path, RETAIN_AND_RECALL, data, "info")
    assert told.returncode == 0, told.stderr
    assert told.stdout == "Acme HQ is in Berlin.\n"
    assert "index_vectors_loaded" in told.stderr


@pytest.mark.timeout(300)
def test_a_script_that_never_closes_its_client_exits_cleanly(tmp_path: Path):
    data = tmp_path / "data"
    done = _script(tmp_path, NEVER_CLOSED, str(data), "50")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n"
    assert done.stderr == ""  # no "cannot schedule new futures after shutdown"
    # Closed at exit: its workers stopped and gave their consumer groups back.
    with sqlite3.connect(data / "bus.sqlite3") as bus:
        assert bus.execute("SELECT group_name FROM group_leases").fetchall() == []


USED_AFTER_MAIN = textwrap.dedent(
    """
    import sys, threading, time
    from cogsub.sdk import MemoryClient

    cm = MemoryClient.embedded(sys.argv[1], embedder="hash")

    def later():
        time.sleep(0.5)
        print("recallable", cm.retain("script-bank", "Kept late.", wait=True).recallable)

    threading.Thread(target=later).start()
    print("main done")
    """
)


@pytest.mark.timeout(300)
def test_a_thread_using_the_client_after_main_returns_finishes_first(tmp_path: Path):
    done = _script(tmp_path, USED_AFTER_MAIN, str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "main done\nrecallable True\n"
    assert done.stderr == ""
