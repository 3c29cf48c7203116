"""KafkaSettings validation, the error mapping and input checks; no broker needed."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.errors import (
    CommitFailedError,
    InvalidPartitionsError,
    InvalidTopicError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NodeNotReadyError,
    NotLeaderForPartitionError,
    RecordTooLargeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)

from cogsub.bus.kafka import KafkaEventBus, KafkaSettings, kafka_errors
from cogsub.core.errors import (
    CogsubError,
    ConfigurationError,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)
from tests.fixtures.kafka import free_port


@pytest.mark.parametrize(
    "changes",
    [
        {"heartbeat_interval_ms": 10_000, "session_timeout_ms": 10_000},
        {"heartbeat_interval_ms": 0},
        {"request_timeout_ms": 0},
        {"max_batch_size": 0},
        {"linger_ms": -1},
        {"replication_factor": 0},
    ],
)
def test_settings_that_cannot_work_are_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        KafkaSettings(**changes)


def test_default_producer_is_idempotent_with_acks_all() -> None:
    options = KafkaEventBus(bootstrap_servers="127.0.0.1:1").producer_options
    assert options["enable_idempotence"] is True
    assert options["acks"] == "all"


def test_idempotence_can_be_turned_off_for_brokers_without_it() -> None:
    bus = KafkaEventBus(
        bootstrap_servers="127.0.0.1:1", settings=KafkaSettings(enable_idempotence=False)
    )
    assert bus.producer_options["enable_idempotence"] is False
    assert bus.producer_options["acks"] == "all"


def test_consumers_commit_by_hand_from_earliest_reading_committed() -> None:
    options = KafkaEventBus(bootstrap_servers="127.0.0.1:1").consumer_options
    assert options["enable_auto_commit"] is False
    assert options["auto_offset_reset"] == "earliest"
    assert options["isolation_level"] == "read_committed"


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (KafkaConnectionError("refused"), UnavailableError),
        (KafkaTimeoutError(), UnavailableError),
        (NodeNotReadyError(), UnavailableError),
        (RequestTimedOutError(), UnavailableError),
        (NotLeaderForPartitionError(), UnavailableError),  # retriable broker error
        (CommitFailedError(), UnavailableError),  # the group rebalanced under us
        (TimeoutError(), UnavailableError),
        (UnknownTopicOrPartitionError(), NotFoundError),
        (InvalidTopicError(), InvalidInputError),
        (InvalidPartitionsError(), ConfigurationError),
        (RecordTooLargeError(), CogsubError),
    ],
)
def test_kafka_errors_map_by_type(raised: Exception, expected: type[CogsubError]) -> None:
    with pytest.raises(CogsubError) as caught, kafka_errors():
        raise raised
    assert type(caught.value) is expected
    assert caught.value.__cause__ is raised
    assert caught.value.retryable is (expected is UnavailableError)


def test_kafka_errors_leave_other_exceptions_alone() -> None:
    with pytest.raises(KeyError), kafka_errors():
        raise KeyError("not kafka")


@pytest.mark.parametrize(
    ("value", "key", "headers"),
    [
        ("text", None, None),
        (b"v", "key", None),
        (b"v", None, {"h": "not bytes"}),
        (b"v", None, ((1, b"x"),)),
    ],
)
async def test_bad_records_are_refused_before_any_connection(
    value: object, key: object, headers: object
) -> None:
    # Nothing listens on this port: refusing must not need the broker.
    bus = KafkaEventBus(bootstrap_servers=f"127.0.0.1:{free_port()}")
    with pytest.raises(InvalidInputError):
        await bus.publish("topic", value, key=key, headers=headers)  # type: ignore[arg-type]
    await bus.close()


async def test_unreachable_broker_is_unavailable() -> None:
    settings = KafkaSettings(request_timeout_ms=1_000)
    bus = KafkaEventBus(bootstrap_servers=f"127.0.0.1:{free_port()}", settings=settings)
    with pytest.raises(UnavailableError):
        await bus.publish("topic", b"v")
    await bus.close()
    with pytest.raises(UnavailableError, match="closed"):
        await bus.publish("topic", b"v")
