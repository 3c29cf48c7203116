"""What an operator reads about the running pipeline: lag, grants and recent rounds.

Served under ``/v1/operations`` and read by the web console, the SDK and the CLI alike.
"""

from __future__ import annotations

from pydantic import Field

from cogsub.core.memory import BoundaryModel, ConsolidationReport

MAX_ROUNDS = 100


class PipelineLag(BoundaryModel):
    """Records published but not yet consumed, per stage (null: the bus did not answer)."""

    ingestion: int | None = Field(
        description="experience.raw records the ingestion group has yet to read"
    )
    extraction: int | None = Field(
        description="experience.enriched and consolidation.request records the consolidation"
        " group has yet to read"
    )


class OperationsStatus(BoundaryModel):
    """Who is asking and how far behind the pipeline is."""

    keys_required: bool
    operator: bool = Field(description="the caller may use every bank (a '*' key, or no keys)")
    banks: list[str] | None = Field(
        description="the banks the caller's key grants; null: every bank"
    )
    lag: PipelineLag | None = Field(
        description="null for a key that does not grant every bank: the lag spans every tenant"
    )


class RecordedRound(BoundaryModel):
    """One finished consolidation round and what it produced."""

    finished_at: str = Field(description="ISO 8601, UTC")
    report: ConsolidationReport


class ConsolidationRounds(BoundaryModel):
    """The latest rounds this API process ran or was asked for, newest first.

    Not those a separate consolidator process ran (a fleet's scheduled rounds).
    """

    rounds: list[RecordedRound]
