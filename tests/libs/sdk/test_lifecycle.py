"""forget, forget_bank, export_bank and import_bank from both SDK clients, against the real app."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from cogsub.api import ApiKeys, ApiLimits, ApiServer, create_app
from cogsub.core.errors import InvalidInputError, NotFoundError
from cogsub.lifecycle import Lifecycle
from cogsub.sdk import AsyncMemoryClient, MemoryClient, PermissionDeniedError
from tests.services.consolidation.stack import NOW, ConsolidationStack, consolidation_stack
from tests.services.lifecycle.scenario import BANK, OTHER, Populated, populate

KEY = "sdk-lifecycle-key-0123456789"


def app_of(stack: ConsolidationStack, *, keys: bool = True) -> FastAPI:
    return create_app(
        service=stack.service,
        auth=ApiKeys({KEY: [BANK]}) if keys else None,
        limits=ApiLimits(max_body_bytes=4 * 1_048_576),
        lifecycle=Lifecycle(archive=stack.archive, index=stack.index, clock=lambda: NOW),
    )


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[ConsolidationStack]:
    async with consolidation_stack(tmp_path / "a") as running:
        yield running


@pytest.fixture
async def bank(stack: ConsolidationStack) -> Populated:
    return await populate(stack)


async def test_the_async_client_forgets_exports_and_imports(
    stack: ConsolidationStack, bank: Populated, tmp_path: Path
) -> None:
    transport = httpx.ASGITransport(app=app_of(stack))
    async with AsyncMemoryClient("http://api", api_key=KEY, transport=transport) as cm:
        lines = [line async for line in cm.export_bank(BANK)]
        assert json.loads(lines[0])["bank_id"] == BANK and json.loads(lines[-1])["end"]
        result = await cm.forget(BANK, bank.turn)
        assert result.forgotten[0] == bank.turn and result.audit_key.startswith(f"audit/{BANK}/")
        with pytest.raises(NotFoundError):
            await cm.forget(BANK, bank.turn)
        with pytest.raises(PermissionDeniedError):
            await cm.forget(OTHER, bank.other_turn)
        with pytest.raises(InvalidInputError, match="confirm"):
            await cm.forget_bank(BANK, confirm=OTHER)
        with pytest.raises(InvalidInputError):
            cm.export_bank("no/such bank")
        # Import the export back: what was forgotten comes back, the rest is present.
        report = await cm.import_bank(BANK, lines)
        assert report.complete and report.conflicts == 0 and report.imported > 0
        assert report.present + report.imported == len(lines) - 2
        assert (await cm.get_memory(BANK, bank.turn)).text.startswith("Caroline")
        gone = await cm.forget_bank(BANK, confirm=BANK)
        assert gone.complete and gone.index_documents > 10
    assert await stack.index.count(BANK) == 0
    async with consolidation_stack(tmp_path / "b") as fresh:
        transport = httpx.ASGITransport(app=app_of(fresh, keys=False))
        async with AsyncMemoryClient("http://api", transport=transport) as target:
            report = await target.import_bank(BANK, "\n".join(lines) + "\n")
            assert report.complete and report.imported == len(lines) - 2
            assert report.indexed == await fresh.index.count(BANK)


async def test_the_sync_client_over_a_live_server(
    stack: ConsolidationStack, bank: Populated
) -> None:
    server = ApiServer(app_of(stack, keys=False), host="127.0.0.1", port=0)
    await server.start()
    try:

        def flow(url: str) -> tuple[list[str], str]:
            with MemoryClient(url, actor="sync-test") as cm:
                lines = list(cm.export_bank(BANK))
                result = cm.forget(BANK, bank.drain)
                assert result.forgotten == [bank.drain, bank.procedure_v2]
                with pytest.raises(NotFoundError):
                    cm.forget(BANK, "never-was")
                report = cm.import_bank(BANK, (line.encode() for line in lines))
                # the correction, v2, its supersession of v1 and the consumed marker
                assert report.imported == 4 and report.complete
                versions = cm.recall(BANK, "deploy billing restart", all_versions=True).results
                v1 = next(h for h in versions if h.id == bank.procedure_v1)
                assert v1.superseded_by == bank.procedure_v2
                return lines, result.audit_key

        lines, audit = await asyncio.to_thread(flow, server.url)
    finally:
        await server.stop()
    assert json.loads(lines[-1])["lines"] == len(lines) - 2
    assert json.loads(await stack.archive.get(audit))["actor"] == "sync-test"
    assert await stack.index.get(BANK, bank.procedure_v2) is not None
