"""``--types`` reads the same way in every command that takes it (one parser, shared)."""

from __future__ import annotations

import argparse

import pytest

from cogsub.cli.main import _parser
from cogsub.cli.memory import fact_types

COMMANDS = (
    ["recall", "jane", "deploy"],
    ["context", "jane", "deploy"],
    ["answer", "jane", "how?"],
    ["memories", "list", "jane"],
)


def test_fact_types_are_comma_separated_and_trimmed() -> None:
    assert fact_types(" procedure, preference ,") == ["procedure", "preference"]


@pytest.mark.parametrize("text", ["", " , ", "procedure,bogus", "Procedure"])
def test_an_unknown_or_empty_type_list_names_the_choices(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="choose from world, .*comma-separated"):
        fact_types(text)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_taking_types_parses_them_alike(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    parsed = _parser().parse_args([*command, "--types", "world,correction"])
    assert parsed.types == ["world", "correction"]
    with pytest.raises(SystemExit):
        _parser().parse_args([*command, "--types", "world,bogus"])
    assert "choose from" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["context", "jane", "deploy"], ["answer", "jane", "how?"]])
def test_context_and_answer_take_tags_and_a_session(command: list[str]) -> None:
    parsed = _parser().parse_args([*command, "--tag", "ops", "--tag", "web", "--session-id", "s"])
    assert (parsed.tags, parsed.session_id) == (["ops", "web"], "s")
