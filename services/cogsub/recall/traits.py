"""What recall reads out of a document's own fields, worked out once per document object.

Fusion and ranking read each candidate's time (twice: as seconds for the neighbour
links, as whole microseconds for recency), its speaker and whether it says when.
One record per document, looked up once a recall, instead of one lookup per value:
a lookup costs more than reading the value from the record.
"""

from __future__ import annotations

from cogsub.core.documents import IndexDocument
from cogsub.recall.context import epoch_us, instant
from cogsub.recall.per_document import PerDocument
from cogsub.recall.query import has_time_expression, speaker_of

__all__ = ["Traits", "traits_of"]


class Traits:
    """A document's time, speaker and (read when first asked) whether it says when."""

    __slots__ = ("_says_when", "epoch_s", "epoch_us", "speaker")

    def __init__(self, document: IndexDocument) -> None:
        moment = instant(document.timestamp)
        self.epoch_s = moment.timestamp()
        self.epoch_us = epoch_us(moment)
        self.speaker = speaker_of(document.summary)
        self._says_when: bool | None = None

    def says_when(self, document: IndexDocument) -> bool:
        """Whether ``document`` (the one these traits are of) says when something happened."""
        if self._says_when is None:  # only "when" questions ask: read then, and once
            self._says_when = has_time_expression(document.summary)
        return self._says_when


#: Never holds its document: the record would keep the document alive in ``PerDocument``.
traits_of = PerDocument(Traits)
