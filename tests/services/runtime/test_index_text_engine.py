"""``COGSUB_INDEX__TEXT_ENGINE`` (and ``__LARGE_BANK``, ``__TEXT_CATCH_UP_S``) choose what
answers the embedded index's text searches."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from cogsub.index.ports import SearchFilters
from cogsub.index.sqlite.index import LARGE_BANK, TEXT_CATCH_UP_S
from cogsub.runtime.adapters import build_index
from cogsub.runtime.settings import Settings
from tests.contract.index_contract import make_doc


@pytest.mark.parametrize(("chosen", "store"), [(None, True), ("fts5", False), ("tantivy", True)])
async def test_the_setting_decides_whether_a_tantivy_store_sits_beside_the_index(
    data_dir: Path,
    unique_name: str,
    monkeypatch: pytest.MonkeyPatch,
    chosen: str | None,
    store: bool,
) -> None:
    if chosen is not None:
        monkeypatch.setenv("COGSUB_INDEX__TEXT_ENGINE", chosen)
    index = build_index(Settings(backend="embedded", data_dir=data_dir))
    try:
        await index.upsert([make_doc(unique_name, "a", summary="saffron")])
        hits = await index.search_text("saffron", SearchFilters(bank_id=unique_name), size=5)
        assert [hit.document.event_id for hit in hits] == [f"{unique_name}-a"]
    finally:
        await index.close()
    assert (data_dir / "index.text" / "state.json").exists() is store


def test_an_unknown_engine_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COGSUB_INDEX__TEXT_ENGINE", "lucene")
    with pytest.raises(ValidationError, match="text_engine"):
        Settings()


async def test_a_bank_is_indexed_by_tantivy_from_the_size_the_setting_names(
    data_dir: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COGSUB_INDEX__LARGE_BANK", "2")
    monkeypatch.setenv("COGSUB_INDEX__TEXT_CATCH_UP_S", "0")  # after every write
    index = build_index(Settings(backend="embedded", data_dir=data_dir))
    state = data_dir / "index.text" / "state.json"
    try:
        await index.upsert([make_doc(unique_name, "a", summary="saffron")])
        assert '"banks": {}' in state.read_text()
        await index.upsert([make_doc(unique_name, "b", summary="saffron rice")])
        assert unique_name in state.read_text()
    finally:
        await index.close()


def test_the_default_large_bank_is_the_index_own(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().index.large_bank == LARGE_BANK
    monkeypatch.setenv("COGSUB_INDEX__LARGE_BANK", "-1")
    with pytest.raises(ValidationError, match="large_bank"):
        Settings()


def test_the_default_catch_up_interval_is_the_index_own(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().index.text_catch_up_s == TEXT_CATCH_UP_S
    monkeypatch.setenv("COGSUB_INDEX__TEXT_CATCH_UP_S", "-0.5")
    with pytest.raises(ValidationError, match="text_catch_up_s"):
        Settings()
