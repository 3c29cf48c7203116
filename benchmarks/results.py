"""Today's figures of each benchmark, written by the benchmark itself.

``record(name, figures, argv)`` writes ``benchmarks/results/{name}.json``: the command that ran,
when, the commit, the machine (cores, memory, load average, Python) and the figures. There is one
file a benchmark and each run replaces it, so the committed files are today's figures and git
history keeps the earlier ones. The project's machine is shared and its speed moves from hour to
hour, which is why the load average when the run ended is kept beside the figures.

``COGSUB_BENCH_RESULTS`` names another directory: the benchmarks' smoke tests point it at a
temporary one, so that a test's tiny run never replaces a real one.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RESULTS_ENV = "COGSUB_BENCH_RESULTS"


def results_dir() -> Path:
    """Where records go: ``COGSUB_BENCH_RESULTS`` if set, else ``benchmarks/results/``."""
    chosen = os.environ.get(RESULTS_ENV)
    return Path(chosen) if chosen else RESULTS_DIR


def command_line(module: str, options: Sequence[str]) -> str:
    """The command that runs it again, from the repository's root."""
    return shlex.join([".venv/bin/python", "-m", f"benchmarks.{module}", *options])


def run_record(
    name: str,
    figures: Mapping[str, Any] | Sequence[Any],
    *,
    command: str,
    when: datetime,
    machine: Mapping[str, Any],
    commit: str | None,
) -> dict[str, Any]:
    """One run's record, as written: what ran, when, where, and what it measured."""
    return {
        "benchmark": name,
        "command": command,
        "date": when.astimezone(UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "machine": dict(machine),
        "figures": figures,
    }


def machine() -> dict[str, Any]:
    """The cores this process may use, the host's memory and load, and the interpreter."""
    return {
        "cores": _cores(),
        "memory_gib": _memory_gib(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


def record(
    name: str,
    figures: Mapping[str, Any] | Sequence[Any],
    argv: Sequence[str] | None = None,
    *,
    module: str | None = None,
) -> Path:
    """Write ``{name}.json`` in the results directory, replacing the last run's; its path.

    Args:
        name: the record's name: the benchmark's module, or the module and its variant.
        figures: what the run measured, as the benchmark prints it with ``--json``.
        argv: the options the benchmark parsed (None: this process's command line).
        module: the benchmark's module under ``benchmarks`` when it is not ``name``.
    """
    folder = results_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    options = sys.argv[1:] if argv is None else argv
    made = run_record(
        name,
        figures,
        command=command_line(module or name, options),
        when=datetime.now(UTC),
        machine=machine(),
        commit=_commit(),
    )
    # Written beside and renamed, so a run stopped half-way leaves the last record whole.
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(made, indent=2, ensure_ascii=False, default=str) + "\n")
    partial.replace(path)
    return path


def _cores() -> int | None:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def _memory_gib() -> float | None:
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 2**20, 1)
    return None


def _commit() -> str | None:
    """The checked-out commit, with ``+dirty`` when the tree has uncommitted changes."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if dirty else head
