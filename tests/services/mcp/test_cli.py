"""`cogsub mcp`'s arguments, checked before anything starts."""

from __future__ import annotations

import pytest

from cogsub.cli import main


def test_a_bank_that_is_no_safe_id_is_refused_naming_the_option(
    capsys: pytest.CaptureFixture[str],
):
    with pytest.raises(SystemExit) as exited:
        main(["mcp", "--bank", "a/b"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --bank" in err and "letters, digits" in err


def test_the_command_is_registered_with_its_options(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exited:
        main(["mcp", "--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    assert all(option in shown for option in ("--bank", "--url", "--api-key", "COGSUB_API_KEY"))
