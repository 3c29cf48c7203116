"""Consolidation (Stage 3) and decay (Stage 9): what turns experiences into knowledge.

Follow the names inward: :class:`ConsolidationWorker` consumes
``experience.enriched`` (→ :class:`FactStage`, extraction) and
``consolidation.request`` (→ :class:`ConsolidationRound`: observations,
corrections into preferences and procedure repairs, the conflict rule, decay),
and both write through :class:`DerivedWriter`.
"""

from cogsub.consolidation.facts import ExtractionOutcome, FactStage
from cogsub.consolidation.round import ConsolidationPolicy, ConsolidationRound
from cogsub.consolidation.worker import ConsolidationWorker, request_payload, requested_bank
from cogsub.consolidation.writer import DerivedWriter, Written

__all__ = [
    "ConsolidationPolicy",
    "ConsolidationRound",
    "ConsolidationWorker",
    "DerivedWriter",
    "ExtractionOutcome",
    "FactStage",
    "Written",
    "request_payload",
    "requested_bank",
]
