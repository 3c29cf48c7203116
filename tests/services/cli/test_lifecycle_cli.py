"""`cogsub forget`, `forget-bank`, `export` and `import` as a user runs them, on a full bank."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from cogsub.api import ApiLimits, ApiServer, create_app
from cogsub.cli import main
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.lifecycle import Lifecycle
from tests.services.consolidation.stack import consolidation_stack
from tests.services.lifecycle.scenario import BANK, OTHER, SECRET, Populated, populate


def _cli(data_dir: Path, *args: str) -> list[str]:
    return ["--data-dir", str(data_dir), "--embedder", "hash", *args]


def _populated(data_dir: Path) -> Populated:
    async def fill() -> Populated:
        async with consolidation_stack(data_dir) as stack:
            return await populate(stack)

    return asyncio.run(fill())


def _read(data_dir: Path, key: str) -> bytes:
    return (data_dir / "archive" / key).read_bytes()


def _count(data_dir: Path, bank: str) -> int:
    async def count() -> int:
        index = SqliteMemoryIndex(data_dir / "index.sqlite3")
        try:
            return await index.count(bank)
        finally:
            await index.close()

    return asyncio.run(count())


def test_forget_a_memory_and_then_the_bank(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bank = _populated(data_dir)
    capsys.readouterr()
    assert main(_cli(data_dir, "forget", BANK, bank.turn, "--json")) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["forgotten"][0] == bank.turn and set(bank.facts) <= set(report["forgotten"])
    audit = _read(data_dir, report["audit_key"])
    assert json.loads(audit)["actor"] == "cli" and SECRET.encode() not in audit
    assert main(_cli(data_dir, "forget", BANK, bank.turn)) == 1
    assert f"no memory {bank.turn!r}" in capsys.readouterr().err
    assert main(_cli(data_dir, "forget-bank", BANK)) == 2
    assert "--yes" in capsys.readouterr().err
    assert _count(data_dir, BANK) > 0
    assert main(_cli(data_dir, "forget-bank", BANK, "--yes")) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"forgot bank {BANK}:") and "documents" in captured.err
    assert _count(data_dir, BANK) == 0 and _count(data_dir, OTHER) > 0


def test_export_to_stdout_then_import_into_a_fresh_directory(
    data_dir: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    _populated(data_dir)
    capsysbinary.readouterr()
    assert main(_cli(data_dir, "export", "--bank", BANK)) == 0
    captured = capsysbinary.readouterr()
    lines = captured.out.splitlines()
    assert [json.loads(line) for line in lines]  # stdout holds JSON lines and nothing else
    assert json.loads(lines[0])["bank_id"] == BANK and json.loads(lines[-1])["end"] is True
    assert b"objects exported" in captured.err
    export = tmp_path / "bank.jsonl"
    export.write_bytes(captured.out)
    fresh = tmp_path / "fresh"
    assert main(_cli(fresh, "import", str(export))) == 0
    out = capsysbinary.readouterr().out.decode()
    assert f"{len(lines) - 2} imported, 0 already present, 0 conflicting, 0 invalid" in out
    assert _count(fresh, BANK) == _count(data_dir, BANK)
    assert main(_cli(fresh, "import", str(export), "--bank", BANK)) == 0
    assert f"0 imported, {len(lines) - 2} already present" in capsysbinary.readouterr().out.decode()


def test_a_conflicting_import_is_reported_and_exits_3(
    data_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _populated(data_dir)
    export = tmp_path / "bank.jsonl"
    assert main(_cli(data_dir, "export", "--bank", BANK, "--output", str(export))) == 0
    capsys.readouterr()
    lines = export.read_bytes().splitlines()
    position = next(i for i, line in enumerate(lines) if b'"key":"events/' in line)
    changed = json.loads(lines[position])
    kept = _read(data_dir, changed["key"])
    changed["object"]["input"]["text"] = "Something else."
    lines[position] = json.dumps(changed).encode()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\n".join(lines))))
    assert main(_cli(data_dir, "import", "-")) == 3
    captured = capsys.readouterr()
    assert "1 conflicting" in captured.out
    assert f"line {position + 1}: conflict {changed['key']}" in captured.err
    assert _read(data_dir, changed["key"]) == kept
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\n".join(lines[1:]))))
    assert main(_cli(data_dir, "import", "-")) == 1
    assert "header" in capsys.readouterr().err


async def test_the_same_commands_through_an_api(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with consolidation_stack(data_dir) as stack:
        bank = await populate(stack)
        capsys.readouterr()
        app = create_app(
            service=stack.service,
            auth=None,
            limits=ApiLimits(),
            lifecycle=Lifecycle(archive=stack.archive, index=stack.index),
        )
        server = ApiServer(app, host="127.0.0.1", port=0)
        await server.start()
        export = tmp_path / "bank.jsonl"
        try:
            url = ["--url", server.url]
            forget = _cli(tmp_path / "unused", "forget", BANK, bank.drain, "--json", *url)
            assert await asyncio.to_thread(main, forget) == 0
            report = json.loads(capsys.readouterr().out)
            assert report["forgotten"] == [bank.drain, bank.procedure_v2]
            exported = _cli(tmp_path / "unused", "export", "--bank", BANK, "-o", str(export), *url)
            assert await asyncio.to_thread(main, exported) == 0
            imported = _cli(tmp_path / "unused", "import", str(export), *url)
            assert await asyncio.to_thread(main, imported) == 0
            assert "already present" in capsys.readouterr().out
        finally:
            await server.stop()
        assert json.loads(await stack.archive.get(report["audit_key"]))["actor"] == "cli"
