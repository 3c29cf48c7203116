"""Settings reach the consolidation and ranking parts the process wires."""

from __future__ import annotations

from pathlib import Path

import pytest

from cogsub.extraction.llm import LLMExtractor
from cogsub.extraction.offline import OfflineExtractor
from cogsub.runtime.settings import ConsolidationSettings, Settings
from cogsub.runtime.wiring import build_extractor, embedded_settings, running_api


def test_the_extractor_is_the_one_the_settings_name() -> None:
    assert build_extractor(ConsolidationSettings(extractor="none")) is None
    assert isinstance(build_extractor(ConsolidationSettings()), OfflineExtractor)
    llm = build_extractor(
        ConsolidationSettings(extractor="llm", llm_model="m", llm_api_key="sk-secret-0123456789")
    )
    assert isinstance(llm, LLMExtractor) and llm.name == "llm:m"
    assert "sk-secret" not in repr(ConsolidationSettings(llm_api_key="sk-secret-0123456789"))


async def test_environment_variables_tune_ranking_and_consolidation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COGSUB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COGSUB_EMBEDDER__KIND", "hash")
    monkeypatch.setenv("COGSUB_RANKING__COUNT_BONUS", "0.05")
    monkeypatch.setenv("COGSUB_RANKING__NAME_FREE_VECTOR", "false")
    monkeypatch.setenv("COGSUB_CONSOLIDATION__DECAY_RATE", "0.8")
    monkeypatch.setenv("COGSUB_CONSOLIDATION__MAX_OUTPUTS", "7")
    async with running_api(Settings(), with_worker=False) as running:
        assert running.service.policy.reinforcement == 0.05
        assert running.service.policy.name_free_vector is False
        consolidate = running.app.state.cogsub.consolidate
        assert consolidate is not None
        rounds = consolidate.__self__.rounds
        assert rounds.policy.decay_rate == 0.8 and rounds.policy.max_outputs == 7
        assert rounds.policy.semantic is False  # the hash embedder's vectors mean nothing


async def test_a_process_can_leave_consolidation_to_a_consolidator_beside_it(
    tmp_path: Path,
) -> None:
    settings = embedded_settings(tmp_path, embedder="hash")
    async with running_api(settings, with_worker=True, consolidating=False) as running:
        assert running.worker is not None and not running.worker.done()
        assert running.consolidation is None  # the consolidation group is left free
    async with running_api(settings, with_worker=True) as running:
        assert running.worker is not None and running.consolidation is not None
