"""The ArchiveStore contract against the embedded adapters: filesystem and in-memory fake."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.register_assert_rewrite("tests.contract.archive_contract")

from cogsub.archive.filesystem import FilesystemArchive  # noqa: E402
from cogsub.archive.memory import InMemoryArchive  # noqa: E402
from cogsub.archive.ports import ArchiveStore  # noqa: E402
from tests.contract.archive_contract import ArchiveFactory, ArchiveStoreContract  # noqa: E402


class TestFilesystemArchive(ArchiveStoreContract):
    @pytest.fixture
    def archive_factory(self, data_dir: Path) -> ArchiveFactory:
        def make() -> ArchiveStore:
            return FilesystemArchive(data_dir / "archive")

        return make


class TestInMemoryArchive(ArchiveStoreContract):
    @pytest.fixture
    def archive_factory(self) -> ArchiveFactory:
        objects: dict[str, bytes] = {}

        def make() -> ArchiveStore:
            return InMemoryArchive(objects=objects)

        return make
