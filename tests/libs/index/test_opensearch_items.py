"""What an mget item's error becomes: retried where a shard could not answer, else not."""

from __future__ import annotations

import pytest

from cogsub.core.errors import CogsubError, UnavailableError
from cogsub.index.opensearch_errors import mget_item_error


@pytest.mark.parametrize(
    "kind", ["no_shard_available_action_exception", "circuit_breaking_exception"]
)
def test_a_shard_that_could_not_answer_is_retried(kind: str) -> None:
    error = mget_item_error({"_id": "e-1", "error": {"type": kind, "reason": "busy"}})
    assert isinstance(error, UnavailableError) and error.retryable
    assert "e-1" in str(error) and kind in str(error)


@pytest.mark.parametrize(
    "item",
    [
        {"_id": "e-2", "error": {"type": "routing_missing_exception", "reason": "routing"}},
        {"_id": "e-3", "error": "something else"},
    ],
)
def test_any_other_item_error_is_not_retried(item: dict[str, object]) -> None:
    error = mget_item_error(item)
    assert type(error) is CogsubError and not error.retryable
    assert str(item["_id"]) in str(error)
