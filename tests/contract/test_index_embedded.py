"""The MemoryIndex contract against the embedded adapter: a SQLite file and ``":memory:"``."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.register_assert_rewrite("tests.contract.index_contract")

from cogsub.index.ports import MemoryIndex  # noqa: E402
from cogsub.index.sqlite import SqliteMemoryIndex  # noqa: E402
from tests.contract.index_contract import IndexFactory, MemoryIndexContract  # noqa: E402


class TestSqliteFileIndex(MemoryIndexContract):
    @pytest.fixture
    def index_factory(self, data_dir: Path) -> IndexFactory:
        def make() -> MemoryIndex:
            return SqliteMemoryIndex(data_dir / "index.sqlite3")

        return make


class TestSqliteInMemoryIndex(MemoryIndexContract):
    durable = False

    @pytest.fixture
    def index_factory(self) -> IndexFactory:
        def make() -> MemoryIndex:
            return SqliteMemoryIndex(":memory:")

        return make


class TestSqliteFileIndexWithTantivy(MemoryIndexContract):
    """The same contract with tantivy answering text searches beside the file."""

    @pytest.fixture
    def index_factory(self, data_dir: Path) -> IndexFactory:
        def make() -> MemoryIndex:
            path = data_dir / "index.sqlite3"
            return SqliteMemoryIndex(path, text_engine="tantivy", large_bank=0, text_catch_up_s=0)

        return make


class TestSqliteInMemoryIndexWithTantivy(MemoryIndexContract):
    durable = False

    @pytest.fixture
    def index_factory(self) -> IndexFactory:
        def make() -> MemoryIndex:
            return SqliteMemoryIndex(
                ":memory:", text_engine="tantivy", large_bank=0, text_catch_up_s=0
            )

        return make


class TestSqliteFileIndexWithTantivyCatchingUpLater(MemoryIndexContract):
    """The same contract while tantivy owes its catch-ups (writes after the first within a
    minute): every written bank's text searches are FTS5's, and the answers the same."""

    @pytest.fixture
    def index_factory(self, data_dir: Path) -> IndexFactory:
        def make() -> MemoryIndex:
            path = data_dir / "index.sqlite3"
            return SqliteMemoryIndex(path, text_engine="tantivy", large_bank=0, text_catch_up_s=60)

        return make
