"""The `cogsub` command as a user runs it: demo, publish, status, and run under kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cogsub.cli import main
from tests.fixtures.kafka import free_port
from tests.services.ingestion.harness import event_body

COGSUB = [sys.executable, "-m", "cogsub.cli.main"]


def test_demo_reproduces_the_seed_artifacts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    (out / "stale").mkdir(parents=True)
    assert main(["demo", "--out", str(out)]) == 0
    assert not (out / "stale").exists()  # cleared and repopulated
    archived = json.loads((out / "object-store/events/2026/05/08/demo-event-001.json").read_text())
    assert archived["importanceScore"] == 0.79
    assert archived["objectStorageKey"] == "events/2026/05/08/demo-event-001.json"
    assert archived["action"]["reasoning"].startswith("Capture the event")
    doc = json.loads((out / "experience_events/demo-event-001.json").read_text())
    assert set(doc) == {
        "event_id",
        "timestamp",
        "event_type",
        "session_id",
        "summary",
        "embedding",
        "importance_score",
        "reward_score",
        "confidence",
        "retrieval_count",
        "decay_factor",
        "object_storage_key",
        "tags",
        "bank_id",
        "fact_type",
    }
    assert doc["reward_score"] == 0.81 and doc["confidence"] == 0.72 and len(doc["embedding"]) == 8
    enriched = json.loads((out / "experience.enriched.json").read_text())
    assert enriched["embeddingDimension"] == 8 and enriched["importanceScore"] == 0.79
    indexed = json.loads((out / "memory.indexed.json").read_text())
    assert indexed == {
        "eventId": "demo-event-001",
        "timestamp": "2026-05-08T22:31:25.237Z",
        "index": "experience_events",
        "objectStorageKey": "events/2026/05/08/demo-event-001.json",
    }
    trace = json.loads((out / "ingestion-trace.json").read_text())
    assert [t["stage"] for t in trace] == [
        "receive",
        "embed",
        "score",
        "key",
        "archive",
        "index",
        "emit",
    ]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] is True and all(summary["invariants"].values())


def test_publish_counts_accepted_and_rejected_with_reasons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "events.jsonl"
    lines = [
        json.dumps(event_body(1)),
        "{broken",
        json.dumps({**event_body(2), "eventId": "a/b"}),
        "",
        json.dumps(event_body(3)),
    ]
    source.write_text("\n".join(lines) + "\n")
    code = main(["--data-dir", str(tmp_path / "d"), "--embedder", "hash", "publish", str(source)])
    out = capsys.readouterr().out
    assert code == 3
    assert "accepted 2, rejected 2" in out
    assert "item 2: (event): must be JSON" in out
    assert "item 3: eventId: must start with" in out


def test_publish_reads_a_json_array_from_stdin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps([event_body(1), event_body(2)])))
    assert main(["--data-dir", str(tmp_path), "--embedder", "hash", "publish", "-"]) == 0
    assert "accepted 2, rejected 0" in capsys.readouterr().out


def test_publish_of_a_missing_file_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--data-dir", str(tmp_path), "publish", str(tmp_path / "nope.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def _status(data_dir: Path) -> dict[str, object]:
    done = subprocess.run(
        [*COGSUB, "--data-dir", str(data_dir), "--embedder", "hash", "status", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


def _wait_for(predicate, timeout_s: float):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("condition not reached in time")


def _start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(timeout=10)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_run_survives_kill_9_and_ctrl_c_without_losing_anything(tmp_path: Path) -> None:
    data = tmp_path / "data"
    events = tmp_path / "events.jsonl"
    count = 5000
    events.write_text("\n".join(json.dumps(event_body(i)) for i in range(count)))
    env = {
        **os.environ,
        "COGSUB_INGESTION__BATCH_SIZE": "50",
        "COGSUB_LOG_FORMAT": "json",
        "COGSUB_API__PORT": "0",  # the API binds a free port, never a fixed one
    }
    subprocess.run(
        [*COGSUB, "--data-dir", str(data), "publish", str(events)],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    run_cmd = [*COGSUB, "--data-dir", str(data), "--embedder", "hash", "run"]
    log = tmp_path / "run.log"
    first = _start(run_cmd, env, log)
    try:
        _wait_for(lambda: b"archived events/" in log.read_bytes(), 60)
        first.send_signal(signal.SIGKILL)  # mid-stream: some events are in, not all
        first.wait(timeout=10)
    finally:
        _stop(first)
    stopped_at = _status(data)
    assert 0 < int(stopped_at["indexed"]) < count  # type: ignore[arg-type]

    second = _start(run_cmd, env, log)
    try:
        final = _wait_for(
            lambda: (s := _status(data))["topics"]["experience.raw"]["lag"] == 0 and s,  # type: ignore[index]
            120,
        )
        second.send_signal(signal.SIGINT)  # Ctrl-C: finish the batch, commit, exit 0
        assert second.wait(timeout=30) == 0
    finally:
        _stop(second)
    assert final["archived"] == count
    settled = _status(data)  # extraction may have gone on until Ctrl-C
    # Every event is indexed, and so is every fact extraction derived from them.
    assert settled["archived"] == count
    assert settled["indexed"] == count + settled["derived"]  # type: ignore[operator]
    assert final["topics"]["experience.raw.dlq"]["end_offset"] == 0  # type: ignore[index]
    assert final["topics"]["memory.indexed"]["end_offset"] >= count  # type: ignore[index]
    assert "published the shipped sample events" not in log.read_text()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_ingest_and_consolidator_processes_share_one_embedded_data_dir(tmp_path: Path) -> None:
    # The embedded stack as a fleet of processes: `cogsub ingest` and `cogsub consolidator`
    # on one data directory, each its own consumer group and event loop.
    data = tmp_path / "data"
    events = tmp_path / "events.jsonl"
    count = 60
    said = [f"Caroline: my sister number {i} lives in Lisbon." for i in range(count)]
    events.write_text("\n".join(json.dumps(event_body(i, text=t)) for i, t in enumerate(said)))
    port = free_port()
    env = {
        **os.environ,
        "COGSUB_LOG_FORMAT": "json",
        "COGSUB_METRICS__HOST": "127.0.0.1",
        "COGSUB_METRICS__PORT": str(port),
    }
    base = [*COGSUB, "--data-dir", str(data), "--embedder", "hash"]
    subprocess.run([*base, "publish", str(events)], env=env, check=True, capture_output=True)
    ingest = _start([*base, "ingest"], {**env, "COGSUB_METRICS__PORT": "0"}, tmp_path / "i.log")
    consolidator = _start([*base, "consolidator"], env, tmp_path / "c.log")
    try:
        settled = _wait_for(
            lambda: (
                (s := _status(data))["topics"]["experience.raw"]["lag"] == 0  # type: ignore[index]
                and s["topics"]["experience.enriched"]["lag"] == 0  # type: ignore[index]
                and int(s["derived"]) > 0  # type: ignore[arg-type]
                and s
            ),
            120,
        )

        def enriched_lag() -> list[float]:
            page = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
            return [
                sample.value
                for family in text_string_to_metric_families(page)
                for sample in family.samples
                if sample.name == "cogsub_consumer_lag"
                and sample.labels == {"topic": "experience.enriched", "group": "consolidation"}
            ]

        # The consolidator serves its own metrics, its lag read from the shared log.
        assert _wait_for(lambda: enriched_lag() == [0.0], 30)
        consolidator.send_signal(signal.SIGTERM)  # finishes the batch in hand, exits 0
        assert consolidator.wait(timeout=30) == 0
        ingest.send_signal(signal.SIGTERM)
        assert ingest.wait(timeout=30) == 0
    finally:
        _stop(consolidator)
        _stop(ingest)
    # Every event archived and indexed once, and every fact the other process derived.
    assert settled["archived"] == count
    assert settled["indexed"] == count + settled["derived"]  # type: ignore[operator]
