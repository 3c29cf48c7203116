"""Index documents and hits built in one line, for the pure ranking tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from cogsub.core import IndexDocument, format_timestamp
from cogsub.index.ports import Hit

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def doc(
    event_id: str,
    *,
    text: str = "x",
    session: str | None = None,
    at: float = 0.0,
    embedding: Sequence[float] = (1.0, 0.0),
    when: datetime = T0,
    importance: float = 0.5,
    retrieval_count: int = 0,
) -> IndexDocument:
    """A document ``at`` seconds after ``when``."""
    return IndexDocument(
        event_id=event_id,
        timestamp=format_timestamp(when + timedelta(seconds=at)),
        event_type="user_input",
        session_id=session,
        summary=text,
        embedding=list(embedding),
        importance_score=importance,
        reward_score=0.5,
        confidence=0.5,
        retrieval_count=retrieval_count,
        object_storage_key=f"events/{event_id}.json",
        tags=[],
        bank_id="b",
    )


def hits(*scored: tuple[IndexDocument, float]) -> list[Hit]:
    return [Hit(document, score) for document, score in scored]
