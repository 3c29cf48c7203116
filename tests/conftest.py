"""Shared fixtures: a clean environment for every test, unique names, server fixtures."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fixtures import containers, engines
from tests.fixtures.skip_guard import PLUGIN_NAME, SkipGuard

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
        choices = engines.session_choices()
        no_skips = engines.no_skips_required(os.environ)
    except engines.EngineSelectionError as exc:
        raise pytest.UsageError(str(exc)) from exc
    if no_skips:
        guard = SkipGuard(lambda item: _must_run(choices, item))
        config.pluginmanager.register(guard, PLUGIN_NAME)


def _must_run(choices: dict[str, engines.Choice], item: pytest.Item) -> bool:
    connected = item.get_closest_marker("connected") is not None
    return engines.must_not_skip(choices, connected, getattr(item, "fixturenames", ()))


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Which Kafka, S3 and OpenSearch the connected suites use (tests/fixtures/engines.py)."""
    return engines.header_lines()


def pytest_collection_finish(session: pytest.Session) -> None:
    # Engine images are pulled and their containers started here, outside every test's timeout
    # (each container has its own, containers.READY_TIMEOUT_S), and only for connected tests.
    connected = [item for item in session.items if item.get_closest_marker("connected")]
    needed = engines.containers_to_start(
        engines.session_choices(), (getattr(item, "fixturenames", ()) for item in connected)
    )
    if not needed:
        return
    try:
        engines.pull_container_images(needed)
    except engines.EngineSelectionError as exc:
        raise pytest.UsageError(str(exc)) from exc
    if not session.config.option.collectonly:
        _start_containers(session.config, needed)


def _container_starters() -> dict[str, Callable[[], object]]:
    # Imported here: pytest_plugins imports these modules itself, with assertion rewriting.
    from tests.fixtures import kafka, opensearch, s3

    return {
        engines.KAFKA.name: kafka.session_kafka_container,
        engines.S3.name: s3.session_minio_container,
        engines.OPENSEARCH.name: opensearch.session_opensearch_container,
    }


def _start_containers(config: pytest.Config, needed: list[engines.Engine]) -> None:
    config.add_cleanup(containers.SESSION.close)
    starters = _container_starters()
    for engine in needed:
        try:
            starters[engine.name]()
        except Exception as exc:  # any failure to come up stops the run before the first test
            containers.SESSION.close()
            raise pytest.UsageError(
                f"the {engine.name} container did not come up before the first test: {exc}"
            ) from exc


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
