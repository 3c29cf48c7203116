"""Stage 1 ingestion: experience.raw → archive (once) + index → announcements."""

from cogsub.ingestion.pipeline import Rejection, RejectionKind, Stage
from cogsub.ingestion.worker import BatchOutcome, IngestionWorker, RetryPolicy, StageObserver

__all__ = [
    "BatchOutcome",
    "IngestionWorker",
    "Rejection",
    "RejectionKind",
    "RetryPolicy",
    "Stage",
    "StageObserver",
]
