"""What recall works out about a document, kept for as long as that document object lives.

The index hands recall the same document objects again while their rows are unchanged
(``DecodedRows``), and a bank's recalls keep meeting the same ~250 of them: reading a
speaker or a time expression out of each summary again was a tenth of fusion. Keyed by
the object, not by its text, so nothing outlives the document: a forgotten row's
document is dropped by the index, and what was kept about it goes with it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from cogsub.core.documents import IndexDocument

__all__ = ["PerDocument"]

T = TypeVar("T")


class PerDocument(Generic[T]):
    """``work(document)``, worked out once per document object while it is alive."""

    def __init__(self, work: Callable[[IndexDocument], T]) -> None:
        self._work = work
        self._kept: dict[int, tuple[weakref.ref[IndexDocument], T]] = {}

    def __len__(self) -> int:
        return len(self._kept)

    def __call__(self, document: IndexDocument) -> T:
        key = id(document)
        kept = self._kept.get(key)
        if kept is not None and kept[0]() is document:
            return kept[1]
        value = self._work(document)
        # The entry leaves when the document dies, before its id can name another object.
        self._kept[key] = (weakref.ref(document, self._dropper(key)), value)
        return value

    def _dropper(self, key: int) -> Callable[[weakref.ref[IndexDocument]], None]:
        kept = self._kept

        def drop(gone: weakref.ref[IndexDocument]) -> None:
            entry = kept.get(key)
            if entry is not None and entry[0] is gone:
                del kept[key]

        return drop
