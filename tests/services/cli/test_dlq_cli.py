"""`cogsub dlq list|show|retry` on a data directory holding a real dead letter, and via --url."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from cogsub.api import ApiServer
from cogsub.bus.sqlite import SqliteEventBus
from cogsub.cli import main
from cogsub.core.topics import EXPERIENCE_RAW, EXPERIENCE_RAW_DLQ
from cogsub.deadletters.letters import RETRIED_FROM_HEADER, Position
from cogsub.runtime.wiring import embedded_settings, running_api

POISON = b'{"eventId": "poison-1", "bankId": "alice", "timestamp": "yesterday"}'


def _cli(data_dir: Path, *args: str) -> list[str]:
    return ["--data-dir", str(data_dir), "--embedder", "hash", *args]


async def _dead_letter(data_dir: Path) -> None:
    """Ingestion refuses an invalid event: a real dead letter on experience.raw.dlq."""
    async with running_api(embedded_settings(data_dir, embedder="hash"), with_worker=True) as api:
        await api.stack.bus.publish(EXPERIENCE_RAW, POISON, key=b"poison-1")
        deadline = time.monotonic() + 10.0
        while (await api.stack.bus.topic_stats(EXPERIENCE_RAW_DLQ)).end_offset == 0:
            assert time.monotonic() < deadline, "the poison record was never dead-lettered"
            await asyncio.sleep(0.05)


def test_list_show_and_retry_read_the_bus_directly(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_dead_letter(data_dir))
    capsys.readouterr()  # the stack's own log lines

    assert main(_cli(data_dir, "dlq", "list", "--json")) == 0
    page = json.loads(capsys.readouterr().out)
    (letter,) = page["dead_letters"]
    assert (letter["kind"], letter["bank_id"], letter["event_id"]) == (
        "invalid",
        "alice",
        "poison-1",
    )
    assert "timestamp" in letter["reason"] and letter["value_text"] == POISON.decode()

    assert main(_cli(data_dir, "dlq", "list")) == 0
    table = capsys.readouterr().out
    assert f"{letter['id']}" in table and "alice/poison-1" in table and "1 dead letter" in table

    assert main(_cli(data_dir, "dlq", "show", letter["id"])) == 0
    shown = capsys.readouterr().out
    assert "kind: invalid" in shown and '"eventId": "poison-1"' in shown

    assert main(_cli(data_dir, "dlq", "retry", letter["id"], "--json")) == 0
    target = Position.parse(json.loads(capsys.readouterr().out)["republished_to"])
    assert target.topic == EXPERIENCE_RAW
    assert _read(data_dir, target) == (POISON, letter["id"].encode())


def _read(data_dir: Path, at: Position) -> tuple[bytes, bytes | None]:
    async def read() -> tuple[bytes, bytes | None]:
        bus = SqliteEventBus(data_dir / "bus.sqlite3")
        try:
            (record,) = await bus.read(at.topic, at.partition, offset=at.offset, max_records=1)
        finally:
            await bus.close()
        return record.value, record.header(RETRIED_FROM_HEADER)

    return asyncio.run(read())


def test_bad_ids_are_refused_before_anything_is_sent(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_cli(data_dir, "dlq", "retry", "experience.raw.dlq/0/0", "nonsense")) == 1
    assert "id: must be topic:partition:offset" in capsys.readouterr().err


async def test_the_same_commands_through_an_api(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await _dead_letter(data_dir)
    async with running_api(embedded_settings(data_dir, embedder="hash"), with_worker=False) as api:
        server = ApiServer(api.app, host="127.0.0.1", port=0)
        await server.start()
        try:
            url = ["--url", server.url]
            capsys.readouterr()  # the stack's own log lines
            listed = _cli(tmp_path / "unused", "dlq", "list", "--json", *url)
            assert await asyncio.to_thread(main, listed) == 0
            (letter,) = json.loads(capsys.readouterr().out)["dead_letters"]
            assert letter["event_id"] == "poison-1"
            shown = _cli(tmp_path / "unused", "dlq", "show", letter["id"], "--json", *url)
            assert await asyncio.to_thread(main, shown) == 0
            assert json.loads(capsys.readouterr().out) == letter
            retried = _cli(tmp_path / "unused", "dlq", "retry", letter["id"], *url)
            assert await asyncio.to_thread(main, retried) == 0
            assert f"retried {letter['id']} -> {EXPERIENCE_RAW}:" in capsys.readouterr().out
        finally:
            await server.stop()
