"""A forgotten memory's text is not left readable in the embedded index's files.

The raw bytes of ``index.sqlite3`` (and its ``-wal``/``-shm`` when present) are
searched for a marker the memory carried: in its original case (the stored
document and the FTS content) and lower-cased (the FTS index's own terms).
Each test first sees the marker there, so the check itself is shown to work.
"""

from __future__ import annotations

from pathlib import Path

from cogsub.core.events import FactType
from cogsub.core.memory import RetainRequest
from cogsub.lifecycle import Lifecycle
from tests.services.consolidation.stack import NOW, ConsolidationStack, consolidation_stack

BANK = "bytes-bank"
# Letters and digits ending in a digit-letter run: one token, which no stemmer shortens.
MARKER = "Zqxv7Kq3Mw9Q"
FORMS = (MARKER.encode(), MARKER.lower().encode(), MARKER.lower()[4:].encode())


def index_bytes(root: Path) -> dict[str, bytes]:
    """Every file of the index database, by name."""
    return {path.name: path.read_bytes() for path in sorted(root.glob("index.sqlite3*"))}


def marker_found(root: Path) -> list[tuple[str, str]]:
    """``(file, form)`` for each form of the marker found in the index's files."""
    return [
        (name, form.decode())
        for name, data in index_bytes(root).items()
        for form in FORMS
        if form in data
    ]


def archive_files_with_marker(root: Path) -> list[str]:
    return [
        str(path)
        for path in (root / "archive").rglob("*")
        if path.is_file() and MARKER.encode() in path.read_bytes()
    ]


async def retain_corpus(stack: ConsolidationStack) -> str:
    """Filler memories around one that carries the marker; its id."""
    for i in range(40):
        filler = RetainRequest(
            content=f"Routine note {i}: the billing deploy ran", timestamp=NOW, wait=True
        )
        await stack.service.retain(BANK, filler)
    secret = RetainRequest(
        content=f"The vault code is {MARKER}, keep it safe",
        tags=[f"code-{MARKER}"],
        fact_type=FactType.WORLD,
        timestamp=NOW,
        wait=True,
    )
    return (await stack.service.retain(BANK, secret)).memory_id


async def test_forget_leaves_no_readable_text_in_the_index_files(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        memory_id = await retain_corpus(stack)
    found = marker_found(tmp_path)
    assert {form for _, form in found} == {form.decode() for form in FORMS}, found

    async with consolidation_stack(tmp_path) as stack:
        lifecycle = Lifecycle(archive=stack.archive, index=stack.index, clock=lambda: NOW)
        report = await lifecycle.forget(BANK, memory_id, actor="tester")
        assert report.forgotten == [memory_id]
        # While the stack still runs: the log was folded in and emptied at the forget.
        assert marker_found(tmp_path) == []
        assert await stack.index.count(BANK) == 40
    assert marker_found(tmp_path) == []
    assert archive_files_with_marker(tmp_path) == []


async def test_forget_bank_leaves_no_readable_text_in_the_index_files(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        await retain_corpus(stack)
        await stack.service.retain(
            "kept-bank", RetainRequest(content="A memory of another bank", timestamp=NOW, wait=True)
        )
    assert marker_found(tmp_path)

    async with consolidation_stack(tmp_path) as stack:
        lifecycle = Lifecycle(archive=stack.archive, index=stack.index, clock=lambda: NOW)
        report = await lifecycle.forget_bank(BANK, actor="tester")
        assert report.index_documents == 41
        assert await stack.index.count("kept-bank") == 1
    assert marker_found(tmp_path) == []
    assert archive_files_with_marker(tmp_path) == []
