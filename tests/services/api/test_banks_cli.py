"""`cogsub banks` and `cogsub memories list|show|history` as a user runs them (in-process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cogsub.cli import main


def _cli(data_dir: Path, *args: str) -> list[str]:
    return ["--data-dir", str(data_dir), "--embedder", "hash", *args]


def _retained(data_dir: Path, bank: str, text: str, out: pytest.CaptureFixture[str]) -> str:
    assert main(_cli(data_dir, "retain", bank, text, "--type", "world", "--json")) == 0
    return str(json.loads(out.readouterr().out)["memory_id"])


def test_banks_and_memory_pages_print_and_page_on(
    data_dir: Path, unique_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [_retained(data_dir, unique_name, f"Office note number {n}.", capsys) for n in range(3)]
    assert main(_cli(data_dir, "banks", "--json")) == 0
    (bank,) = json.loads(capsys.readouterr().out)["banks"]
    assert (bank["bank_id"], bank["total"], bank["counts"]) == (unique_name, 3, {"world": 3})
    assert main(_cli(data_dir, "banks")) == 0
    assert unique_name in capsys.readouterr().out

    args = ["memories", "list", unique_name, "--limit", "2", "--json"]
    assert main(_cli(data_dir, *args)) == 0
    first = json.loads(capsys.readouterr().out)
    assert len(first["memories"]) == 2 and first["next_cursor"]
    assert main(_cli(data_dir, *args, "--cursor", first["next_cursor"])) == 0
    rest = json.loads(capsys.readouterr().out)
    listed = [m["id"] for m in first["memories"] + rest["memories"]]
    assert sorted(listed) == sorted(ids) and rest["next_cursor"] is None

    assert main(_cli(data_dir, "memories", "list", unique_name, "--limit", "1", "--all")) == 0
    printed = capsys.readouterr().out
    assert printed.count("Office") == 3  # one page each, then the next one's cursor
    assert printed.count("next page: --cursor") == 2


def test_show_and_history_print_the_memory_and_its_lineage(
    data_dir: Path, unique_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    memory_id = _retained(data_dir, unique_name, "Jane owns the billing service.", capsys)
    assert main(_cli(data_dir, "memories", "show", unique_name, memory_id)) == 0
    shown = capsys.readouterr().out
    assert "Jane owns the billing service." in shown and memory_id in shown
    assert main(_cli(data_dir, "memories", "history", unique_name, memory_id, "--json")) == 0
    history = json.loads(capsys.readouterr().out)
    assert history["memory_id"] == memory_id and history["versions"][0]["current"]
    assert main(_cli(data_dir, "memories", "history", unique_name, memory_id)) == 0
    assert "signals: importance" in capsys.readouterr().out
    assert main(_cli(data_dir, "memories", "show", unique_name, "nope")) != 0
    assert "nope" in capsys.readouterr().err


def test_bad_listing_arguments_are_refused(
    data_dir: Path, unique_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(_cli(data_dir, "memories", "list", unique_name, "--types", "planet"))
    with pytest.raises(SystemExit):
        main(_cli(data_dir, "memories", "list", unique_name, "--limit", "500"))
    assert main(_cli(data_dir, "memories", "list", unique_name, "--since", "yesterday")) != 0
    assert "since" in capsys.readouterr().err
