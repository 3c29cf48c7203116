"""Each benchmark writes its run to ``benchmarks/results/{name}.json``: what ran, where, what."""

from __future__ import annotations

import json
import os
import shlex
from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchmarks import extraction, results


def test_a_record_names_the_command_the_machine_and_the_figures(bench_results: Path) -> None:
    path = results.record("sample", {"events_per_s": 1234.5}, ["--events", "10"])

    assert path == bench_results / "sample.json"
    written = json.loads(path.read_text())
    assert written["benchmark"] == "sample"
    assert written["command"] == ".venv/bin/python -m benchmarks.sample --events 10"
    assert written["figures"] == {"events_per_s": 1234.5}
    assert datetime.fromisoformat(written["date"]).tzinfo is not None
    assert written["machine"]["cores"] == len(os.sched_getaffinity(0))
    assert written["machine"]["memory_gib"] > 0
    assert written["machine"]["python"].count(".") == 2


def test_a_run_replaces_the_last_record_of_its_name_and_leaves_no_partial_file(
    bench_results: Path,
) -> None:
    results.record("sample", {"run": 1}, [])
    results.record("sample", {"run": 2}, [])
    results.record("other", {"run": 3}, [])

    assert sorted(p.name for p in bench_results.iterdir()) == ["other.json", "sample.json"]
    assert json.loads((bench_results / "sample.json").read_text())["figures"] == {"run": 2}


def test_a_variant_names_its_module_in_the_command(bench_results: Path) -> None:
    path = results.record("ingest_distributed", [], ["--backend", "distributed"], module="ingest")

    command = json.loads(path.read_text())["command"]
    assert shlex.split(command)[1:] == ["-m", "benchmarks.ingest", "--backend", "distributed"]


def test_options_with_spaces_are_quoted_so_the_command_runs_as_recorded() -> None:
    command = results.command_line("extraction", ["--locomo", "my data/locomo.json"])

    assert shlex.split(command)[-1] == "my data/locomo.json"


def test_the_record_keeps_the_date_in_utc() -> None:
    made = results.run_record(
        "x",
        {},
        command="c",
        when=datetime(2026, 12, 7, 9, 30, tzinfo=UTC),
        machine={"cores": 2},
        commit="abc1234",
    )

    assert made["date"] == "2026-12-07T09:30:00+00:00"
    assert made["commit"] == "abc1234"


def test_without_the_variable_records_go_to_the_repositorys_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(results.RESULTS_ENV)

    assert results.results_dir() == Path(results.__file__).resolve().parent / "results"


def test_a_benchmark_records_the_figures_it_printed(
    bench_results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = ["--events", "50", "--repeats", "1", "--locomo", str(tmp_path / "absent.json")]
    assert extraction.main(options) == 0

    written = json.loads((bench_results / "extraction.json").read_text())
    assert written["command"].endswith("benchmarks.extraction " + shlex.join(options))
    soak = written["figures"]["soak events"]
    assert soak["texts"] == 50 and soak["same_mentions"] is True
    printed = capsys.readouterr().out
    assert f"{soak['us_per_text']['extraction, whole']:7.1f} µs per text" in printed
