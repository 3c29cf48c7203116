"""The one safe-id check outside a model: the API's paths, the SDK, MCP and the CLI share it."""

from __future__ import annotations

import pytest

from cogsub.core.errors import InvalidInputError
from cogsub.core.events import checked_safe_id


def test_a_safe_id_comes_back_unchanged() -> None:
    assert checked_safe_id("bank_id", "jane@example.com") == "jane@example.com"


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("", "at least 1 character"),
        ("../etc", "must start with a letter"),
        ("a..b", "must not contain '..'"),
        ("a/b", "contain only letters"),
        ("x" * 129, "at most 128 characters"),
        (7, "valid string"),
    ],
)
def test_a_broken_id_names_the_field_and_the_rule(value: object, rule: str) -> None:
    with pytest.raises(InvalidInputError) as raised:
        checked_safe_id("memory_id", value)
    (problem,) = raised.value.problems
    assert problem.field == "memory_id" and rule in problem.rule
