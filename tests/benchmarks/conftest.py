"""The benchmarks' smoke tests record into a temporary directory, never over today's figures."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.results import RESULTS_ENV


@pytest.fixture(autouse=True)
def bench_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bench-results"
    monkeypatch.setenv(RESULTS_ENV, str(folder))
    return folder
