"""The public names of ``cogsub.extraction`` are pinned: changing them is a decision."""

from __future__ import annotations

import cogsub.extraction


def test_public_names_are_pinned() -> None:
    assert cogsub.extraction.__all__ == [
        "EXTRACTED_TYPES",
        "DateMention",
        "ExtractedFact",
        "ExtractionInput",
        "ExtractionRejected",
        "FactExtractor",
        "LLMExtractor",
        "OfflineExtractor",
        "extract_facts",
        "format_day",
        "resolve_dates",
        "states_facts",
    ]


def test_every_public_name_exists() -> None:
    for name in cogsub.extraction.__all__:
        assert getattr(cogsub.extraction, name) is not None
