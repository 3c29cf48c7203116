"""Pin the public names of ``cogsub.bus.kafka`` (a package of one module per idea)."""

from __future__ import annotations

import cogsub.bus.kafka


def test_public_names_are_pinned_and_sorted() -> None:
    assert cogsub.bus.kafka.__all__ == [
        "KafkaConsumer",
        "KafkaEventBus",
        "KafkaSettings",
        "kafka_errors",
        "stop_consumer",
    ]
    assert cogsub.bus.kafka.__all__ == sorted(cogsub.bus.kafka.__all__)
    assert all(hasattr(cogsub.bus.kafka, name) for name in cogsub.bus.kafka.__all__)
