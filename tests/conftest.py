"""Shared fixtures: a clean environment for every test, unique names, server fixtures."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures import engines

pytest_plugins = [
    "tests.fixtures.kafka",
    "tests.fixtures.s3",
    "tests.fixtures.opensearch",
    "tests.fixtures.embedding_server",
    "tests.fixtures.chat_server",
    "tests.fixtures.rerank_server",
    "tests.fixtures.tracing",
]

# Variables that point tests at external servers survive the clean-up on purpose.
_KEPT = ("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "VIRTUAL_ENV", "PYTHONPATH", "CI")
_EXTERNAL_PREFIXES = ("KAFKA_", "S3_", "OPENSEARCH_", "AWS_", "COGSUB_TEST_")


def pytest_configure(config: pytest.Config) -> None:
    # A forced engine source that cannot be had stops the run before any test, loudly.
    try:
        engines.session_choices()
    except engines.EngineSelectionError as exc:
        raise pytest.UsageError(str(exc)) from exc


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Which Kafka, S3 and OpenSearch the connected suites use (tests/fixtures/engines.py)."""
    return engines.header_lines()


def pytest_collection_finish(session: pytest.Session) -> None:
    # Engine images are pulled here, outside every test's timeout, and only for connected tests.
    if any(item.get_closest_marker("connected") for item in session.items):
        try:
            engines.pull_container_images()
        except engines.EngineSelectionError as exc:
            raise pytest.UsageError(str(exc)) from exc


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name in _KEPT or name.startswith(_EXTERNAL_PREFIXES):
            continue
        monkeypatch.delenv(name)
    yield


@pytest.fixture
def unique_name() -> str:
    """A fresh name for a topic, index, prefix or bank."""
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path
