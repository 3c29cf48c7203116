"""Stage 1 ingestion: experience.raw → archive (once) + index → announcements."""

from cogsub.ingestion.batch import BatchOutcome, StageObserver
from cogsub.ingestion.pipeline import Rejection, RejectionKind, Stage
from cogsub.ingestion.worker import IngestionWorker, RetryPolicy

__all__ = [
    "BatchOutcome",
    "IngestionWorker",
    "Rejection",
    "RejectionKind",
    "RetryPolicy",
    "Stage",
    "StageObserver",
]
