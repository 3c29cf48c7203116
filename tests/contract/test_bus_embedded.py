"""The EventBus contract against the embedded adapters: SQLite file and in-memory fake."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.register_assert_rewrite("tests.contract.bus_contract")

from cogsub.bus.memory import InMemoryBusState, InMemoryEventBus  # noqa: E402
from cogsub.bus.ports import EventBus  # noqa: E402
from cogsub.bus.sqlite import SqliteEventBus  # noqa: E402
from tests.contract.bus_contract import BusFactory, EventBusContract  # noqa: E402


class TestSqliteEventBus(EventBusContract):
    @pytest.fixture
    def bus_factory(self, data_dir: Path) -> BusFactory:
        def make() -> EventBus:
            return SqliteEventBus(data_dir / "bus.sqlite3")

        return make


class TestInMemoryEventBus(EventBusContract):
    @pytest.fixture
    def bus_factory(self) -> BusFactory:
        state = InMemoryBusState()

        def make() -> EventBus:
            return InMemoryEventBus(state=state)

        return make
