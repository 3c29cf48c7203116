"""aiokafka's exceptions translated into the project's errors, by exception type."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from aiokafka import errors as kafka

from cogsub.core.errors import (
    CogsubError,
    ConfigurationError,
    FieldProblem,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)

_UNAVAILABLE = (
    kafka.KafkaConnectionError,
    kafka.KafkaTimeoutError,
    kafka.NodeNotReadyError,
    kafka.RequestTimedOutError,
    # The group moved on while we worked: the same call succeeds once it settles.
    kafka.CommitFailedError,
    kafka.RebalanceInProgressError,
    kafka.IllegalGenerationError,
    kafka.UnknownMemberIdError,
)
# The broker no longer knows this producer's sequence numbers (it restarted without
# them): the producer is stuck on those partitions until a new one replaces it.
PRODUCER_STATE_LOST = (kafka.OutOfOrderSequenceNumber, kafka.UnknownProducerId)
_REFUSED_SETTINGS = (
    kafka.InvalidPartitionsError,
    kafka.InvalidReplicationFactorError,
    kafka.InvalidSessionTimeoutError,
)


@contextmanager
def kafka_errors() -> Iterator[None]:
    """Translate aiokafka exceptions into the project's errors, by exception type."""
    try:
        yield
    except CogsubError:
        raise
    except kafka.UnknownTopicOrPartitionError as exc:
        raise NotFoundError(f"unknown topic or partition: {exc}") from exc
    except kafka.InvalidTopicError as exc:
        problem = FieldProblem("topic", f"is not a valid topic name: {exc}")
        raise InvalidInputError([problem]) from exc
    except _REFUSED_SETTINGS as exc:
        raise ConfigurationError(f"the broker refused these settings: {exc!r}") from exc
    except _UNAVAILABLE as exc:
        raise UnavailableError(f"kafka is unavailable: {exc!r}") from exc
    except PRODUCER_STATE_LOST as exc:
        raise UnavailableError(f"kafka lost this producer's state: {exc!r}") from exc
    except kafka.KafkaError as exc:
        if exc.retriable:
            raise UnavailableError(f"kafka is unavailable: {exc!r}") from exc
        raise CogsubError(f"kafka error: {exc!r}") from exc
    except kafka.ConsumerStoppedError as exc:
        raise UnavailableError("the kafka consumer is closed") from exc
    except TimeoutError as exc:
        raise UnavailableError("kafka did not answer in time") from exc
