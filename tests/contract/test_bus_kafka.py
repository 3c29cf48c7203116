"""The EventBus contract against KafkaEventBus on a real broker (noida-db by default)."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("tests.contract.bus_contract")

from cogsub.bus.kafka import KafkaEventBus  # noqa: E402
from cogsub.bus.ports import EventBus  # noqa: E402
from tests.contract.bus_contract import BusFactory, EventBusContract  # noqa: E402


@pytest.mark.connected
class TestKafkaEventBus(EventBusContract):
    @pytest.fixture
    def bus_factory(self, kafka_bootstrap: str) -> BusFactory:
        def make() -> EventBus:
            return KafkaEventBus(bootstrap_servers=kafka_bootstrap, client_id="cogsub-contract")

        return make
