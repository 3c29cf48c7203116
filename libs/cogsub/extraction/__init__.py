"""Fact extraction: plain content in, ``world`` and ``experience`` facts out.

The :class:`FactExtractor` port and its two adapters:

- :class:`OfflineExtractor` — deterministic rules, no model (the default);
- :class:`LLMExtractor` — any OpenAI-compatible ``/chat/completions`` endpoint.
"""

from cogsub.extraction.dates import DateMention, format_day, resolve_dates
from cogsub.extraction.llm import LLMExtractor
from cogsub.extraction.offline import OfflineExtractor, extract_facts, states_facts
from cogsub.extraction.ports import (
    EXTRACTED_TYPES,
    ExtractedFact,
    ExtractionInput,
    ExtractionRejected,
    FactExtractor,
)

__all__ = [
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
