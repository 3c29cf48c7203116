"""One batch with the same event id in two banks archives and indexes both, each its own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.services.ingestion.harness import Harness, event_body


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    h = Harness(tmp_path)
    yield h
    await h.close()


async def test_two_banks_invoice_7_in_one_batch_are_two_memories(harness: Harness) -> None:
    bob = {**event_body(7, text="bob owes forty euros", bank="bob")}
    alice = {**event_body(7, text="alice paid in full", bank="alice")}
    bob_again = {**bob}  # a redelivery inside the same batch stays one memory
    await harness.publish([bob, alice, bob_again])
    bus = harness.bus()
    await harness.drain(harness.worker(bus=bus), bus)
    index = harness.index()
    found = {bank: await index.get(bank, "ev-00007") for bank in ("bob", "alice")}
    assert {bank: doc.summary for bank, doc in found.items() if doc} == {
        "bob": "bob owes forty euros",
        "alice": "alice paid in full",
    }
    assert found["bob"].embedding != found["alice"].embedding  # type: ignore[union-attr]
    assert sorted(await harness.archived_keys()) == [
        "events/2026/05/08/banks/alice/ev-00007.json",
        "events/2026/05/08/banks/bob/ev-00007.json",
    ]
    assert await harness.dead_letters() == []
