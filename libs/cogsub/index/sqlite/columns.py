"""How a document's fields are stored: epoch microseconds, fact codes, float32 BLOBs.

The encoding every part of the embedded index agrees on, with no SQL in it: the
row store writes it, the readers decode it and the vector cache takes its rows.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from cogsub.core.documents import IndexDocument
from cogsub.core.errors import FieldProblem, InvalidInputError
from cogsub.core.events import FactType

#: What the vector cache takes of a row, in this order (an SQL column list as well).
CACHE_ROW_COLUMNS = "doc_id, event_id, bank_id, fact_type, ts_us, importance_score, tags, embedding"
#: A row of ``CACHE_ROW_COLUMNS``: tags as a JSON array, the embedding as a float32 BLOB.
CacheRow = tuple[Any, ...]
#: A row's ``detail`` (the text past the summary), read from its stored JSON.
STORED_DETAIL = "COALESCE(json_extract(body, '$.detail'), '')"
#: Fact types as small integers (0: no fact type).
FACT_CODES = {fact: code for code, fact in enumerate(FactType, start=1)}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_us(value: datetime) -> int:
    """Microseconds since the epoch; a naive datetime is UTC."""
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return (aware - _EPOCH) // timedelta(microseconds=1)


def timestamp_us(text: str) -> int:
    """``epoch_us`` of an ISO-8601 timestamp; ``InvalidInputError`` for anything else."""
    try:
        return epoch_us(datetime.fromisoformat(text))
    except ValueError:
        rule = "must be an ISO-8601 timestamp, e.g. 2026-05-08T22:31:25.237Z"
        raise InvalidInputError([FieldProblem("timestamp", rule)]) from None


def prepared(index: int, doc: IndexDocument) -> tuple[int, bytes]:
    """The event time in epoch microseconds and the embedding BLOB, validated."""
    vector = np.asarray(doc.embedding, dtype="<f4")
    if not np.isfinite(vector).all():
        problem = FieldProblem(f"documents[{index}].embedding", "must hold finite numbers")
        raise InvalidInputError([problem])
    return timestamp_us(doc.timestamp), vector.tobytes()


def document(body: str, blob: bytes) -> IndexDocument:
    """The document stored as ``body`` (JSON without the embedding) and its BLOB."""
    data = json.loads(body)
    data["embedding"] = np.frombuffer(blob, dtype=np.float32).tolist()
    return IndexDocument.model_validate(data)
