"""The MemoryIndex port: the associative layer (BM25 + vectors + filters).

Contract every adapter keeps:

- A document is identified by (``bank_id``, ``event_id``): the same
  ``event_id`` in two banks is two independent documents, and nothing done
  to one (update, decay, delete) touches the other.
- ``upsert`` is idempotent by that identity: the same document twice leaves
  one row; a changed document replaces the row. Documents are visible to search
  when ``upsert`` returns (adapters refresh as needed).
- Every read takes a ``bank_id`` and never returns a document of another
  bank — not by search, filter, nor id.
- ``search_text`` ranks by BM25 over ``summary`` (and tags); ``search_vector``
  by cosine similarity to a unit vector. Both apply the same filters and
  return at most ``size`` hits, best first, each with the engine's raw score.
- Filters: ``since`` inclusive, ``until`` exclusive (naive datetimes are UTC);
  tags match exactly; an empty ``fact_types`` or ``tags_any`` set matches nothing.
- A document embedding of the wrong length raises
  ``ConfigurationError``, a query vector of the wrong length ``InvalidInputError``.
- ``update`` changes only the ranking signals and tags named in the patch,
  atomically against concurrent updates (a read-modify-write of the whole
  document can lose another writer's change; a patch cannot), and raises
  ``NotFoundError`` for a missing doc.
  ``update_many`` applies one patch per document of one bank, each as
  ``update`` would, skips ids the bank does not hold, and returns how many it
  found; it is the bulk form for background jobs (decay, retrieval counts). It
  is not atomic across documents: after a failure part of it may be applied.
- ``decay_page`` applies one epoch of decay (``DecayStep``) in place to the
  next ``size`` documents of one bank in ``event_id`` order after the cursor
  ``after`` (exclusive): each of them older than ``step.before`` whose
  ``decay_factor`` is above the floor gets ``step.applied_to`` it, and nothing
  else of it changes. It returns how many it changed and the page's last id
  (the next cursor), or ``None`` for the cursor once no document is after
  ``after``. Background decay walks a bank with it without reading a document.
  A page is one atomic write where the engine has transactions; elsewhere a
  document another writer changes during the page is decayed from that
  writer's value (never from the one read before), and one deleted meanwhile
  is skipped.
- ``delete_many`` removes the listed documents of one bank and returns how
  many it removed: ids of another bank, unknown ids and repeats count 0 and
  are left alone (another bank's document is never touched); an empty list
  is 0. It takes lists of any length (adapters split them into bounded
  requests), and what it removed is gone from every read on return. It is
  not atomic across requests: after a failure part of the list may be gone,
  and calling it again with the same list finishes the job.
- ``neighbours`` returns, for each anchor document with a ``session_id``, up
  to ``each_side`` documents of the same bank and session just before it and
  just after it in (``timestamp``, ``event_id``) order, among those matching
  the filters and, with ``within_s``, at most that many seconds from the
  anchor: the turns around a hit, which the searches may not have found.
  Anchors, ids in ``exclude``, repeats and anchors without a session add
  nothing (excluded documents still count towards ``each_side``).
- ``recall_candidates`` is recall's one trip into the index: the hits of
  ``search_text`` and ``search_vector`` (same filters, pools of ``text_pool`` and
  ``vector_pool``), then with a ``NeighbourWindow`` the ``neighbours`` of the
  best ``anchors_each`` hits of each search (text's first, no repeats),
  excluding every pooled id, and with ``procedure_versions`` the highest
  ``version:`` tag of each procedure (``procedure:`` tag) among all those
  documents, over the whole bank whatever the filters. Its documents carry no
  embedding (an empty list): their vectors are rows of ``Candidates.embeddings``,
  one float32 matrix, so that nothing builds a list of floats per document.
- ``scan`` lists a bank's documents matching the filters in ``event_id``
  order, ``size`` at a time after the cursor ``after`` (exclusive), so a
  background job can walk a large bank in bounded steps.
- ``scan_in_replay_order`` lists them in replay order instead (see
  ``replay_order``: ``decay_factor`` descending, then ``importance_score``
  descending, then ``event_id``), after the place of the document ``after``,
  so a job that reads a bounded slice of a bank (a consolidation round) gets
  its most alive memories without walking the rest. Engines may compare the
  two signals in single precision (values closer than that tie, and order by
  id). A cursor whose signals changed since it was read resumes at its new
  place, so a walk during decay may skip or repeat documents.
- ``list_newest`` lists a bank's documents matching the filters newest first,
  in descending (``timestamp``, ``event_id``) order, ``size`` at a time strictly
  after the ``ListingKey`` ``after`` (the last one handed out). A document
  present for a whole walk is listed exactly once whatever is written or
  deleted meanwhile. Superseded documents (a ``superseded-by:`` tag) are left
  out unless ``include_superseded``. Its documents carry no embedding.
- ``bank_counts`` summarises banks holding documents, in ``bank_id`` order,
  ``size`` at a time after ``after`` (exclusive): documents per fact type and
  the newest timestamp. With ``bank_ids`` only those banks are considered.
- Backends that are down raise ``UnavailableError`` (retryable).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError

from cogsub.core.derived import with_tags
from cogsub.core.documents import IndexDocument
from cogsub.core.errors import FieldProblem, InvalidInputError
from cogsub.core.events import FactType
from cogsub.core.listing import ListingKey
from cogsub.core.memory import PROCEDURE_TAG_PREFIX, VERSION_TAG_PREFIX


def replay_order(doc: IndexDocument) -> tuple[float, float, str]:
    """Sort key for replay: the most alive first, then the most important (then id, stable)."""
    return (-doc.decay_factor, -doc.importance_score, doc.event_id)


@dataclass(frozen=True)
class SearchFilters:
    """Restrictions every search applies; ``bank_id`` is mandatory on purpose."""

    bank_id: str
    fact_types: frozenset[FactType] | None = None
    tags_any: frozenset[str] | None = None
    since: datetime | None = None
    until: datetime | None = None
    min_importance: float | None = None


@dataclass(frozen=True)
class Hit:
    """A document and the engine's raw score for it (BM25 or cosine)."""

    document: IndexDocument
    score: float


@dataclass(frozen=True)
class NeighbourWindow:
    """Which turns around recall's best hits join its candidates (see ``neighbours``)."""

    anchors_each: int
    each_side: int
    within_s: float | None = None


@dataclass(frozen=True)
class Embeddings:
    """Document vectors as the rows of one float32 matrix, found by ``event_id``."""

    rows: Mapping[str, int]
    matrix: npt.NDArray[np.float32]

    @classmethod
    def of(cls, documents: Sequence[IndexDocument]) -> Embeddings:
        """The embeddings the documents carry (adapters that read them as lists)."""
        rows = {doc.event_id: row for row, doc in enumerate(documents)}
        width = len(documents[0].embedding) if documents else 0
        matrix = np.asarray([doc.embedding for doc in documents], dtype=np.float32)
        return cls(rows, matrix.reshape(len(documents), width))

    def rows_of(self, event_ids: Sequence[str]) -> npt.NDArray[np.float32] | None:
        """The vectors of ``event_ids`` in order, or ``None`` if any is missing."""
        if any(event_id not in self.rows for event_id in event_ids):
            return None
        return self.matrix[[self.rows[event_id] for event_id in event_ids]]


@dataclass(frozen=True)
class Candidates:
    """What recall reads from the index in one trip (see ``recall_candidates``)."""

    text: list[Hit]
    vector: list[Hit]
    neighbours: list[IndexDocument]
    newest_versions: dict[str, int]
    embeddings: Embeddings

    @classmethod
    def empty(cls, dimension: int = 0) -> Candidates:
        return cls([], [], [], {}, Embeddings({}, np.zeros((0, dimension), dtype=np.float32)))


def newest_versions(tag_sets: Iterable[Sequence[str]], wanted: Collection[str]) -> dict[str, int]:
    """The highest version of each procedure of ``wanted`` among documents' tag sets."""
    newest: dict[str, int] = {}
    for tags in tag_sets:
        found = procedure_of(tags)
        if found is not None and found[0] in wanted:
            newest[found[0]] = max(newest.get(found[0], 0), found[1])
    return newest


def is_newest_version(doc: IndexDocument, newest: Mapping[str, int]) -> bool:
    """False for a procedure version of which ``newest`` knows a later one."""
    found = procedure_of(doc.tags)
    return found is None or found[1] >= newest.get(found[0], found[1])


def procedure_of(tags: Sequence[str]) -> tuple[str, int] | None:
    """(procedure id, version) of a procedure memory's tags; ``None`` for any other."""
    pid = version = None
    for tag in tags:  # one pass: recall asks this of every candidate
        if pid is None and tag.startswith(PROCEDURE_TAG_PREFIX):
            pid = tag[len(PROCEDURE_TAG_PREFIX) :]
        elif version is None and tag.startswith(VERSION_TAG_PREFIX):
            version = tag[len(VERSION_TAG_PREFIX) :]
    if pid is None or version is None or not version.isdigit():
        return None
    return pid, int(version)


@dataclass(frozen=True)
class DocumentPatch:
    """A partial update of ranking signals and tags; ``None`` leaves a field alone.

    Tags: those starting with any of ``drop_tags_under`` go, then ``add_tags``
    are appended (as ``cogsub.core.derived.with_tags`` does), so a counter kept
    as a tag (``proof:3``) is replaced without disturbing the other signals.
    """

    importance_score: float | None = None
    decay_factor: float | None = None
    retrieval_count: int | None = None
    retrieval_count_increment: int = 0
    add_tags: tuple[str, ...] = ()
    drop_tags_under: tuple[str, ...] = ()

    def applied_to(self, doc: IndexDocument) -> IndexDocument:
        """``doc`` with this patch applied, validated (bounds included) like a new document.

        Raises:
            InvalidInputError: the result breaks a bound (importance above 1...).
        """
        data = doc.model_dump()
        if self.importance_score is not None:
            data["importance_score"] = self.importance_score
        if self.decay_factor is not None:
            data["decay_factor"] = self.decay_factor
        if self.retrieval_count is not None:
            data["retrieval_count"] = self.retrieval_count
        data["retrieval_count"] += self.retrieval_count_increment
        if self.add_tags or self.drop_tags_under:
            data["tags"] = with_tags(doc, list(self.add_tags), replace=self.drop_tags_under).tags
        try:
            # model_copy would skip validation; the bounds matter here.
            return IndexDocument.model_validate(data)
        except ValidationError as exc:
            problems = [
                FieldProblem(".".join(str(part) for part in detail["loc"]), detail["msg"])
                for detail in exc.errors(include_url=False)
            ]
            raise InvalidInputError(problems) from None


@dataclass(frozen=True)
class DecayStep:
    """One epoch of decay: what is older than ``before`` loses priority, down to ``floor``.

    Raises:
        InvalidInputError: ``rate`` outside (0, 1] or ``floor`` outside [0, 1].
    """

    rate: float
    floor: float
    before: datetime

    def __post_init__(self) -> None:
        problems = []
        if not 0.0 < self.rate <= 1.0:
            problems.append(FieldProblem("rate", "must be above 0 and at most 1"))
        if not 0.0 <= self.floor <= 1.0:
            problems.append(FieldProblem("floor", "must be between 0 and 1"))
        if problems:
            raise InvalidInputError(problems)

    def applied_to(self, factor: float) -> float:
        """``factor`` after this step; one at or below the floor is left as it is."""
        return max(self.floor, min(1.0, factor) * self.rate) if factor > self.floor else factor


def check_decay_page_size(size: int) -> None:
    """Raise ``InvalidInputError`` unless ``size`` is a positive page size."""
    if size < 1:
        raise InvalidInputError([FieldProblem("size", "must be at least 1")])


@dataclass(frozen=True)
class DecayedPage:
    """What one ``decay_page`` did: documents changed, and the cursor for the next page."""

    decayed: int
    last: str | None


@dataclass(frozen=True)
class BankCounts:
    """What one bank holds: documents per fact type (``None``: untyped) and the newest time."""

    bank_id: str
    counts: Mapping[FactType | None, int]
    newest_at: str | None

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class MemoryIndex(Protocol):
    """Compact memory documents, searchable by text and by vector."""

    async def ensure(self, *, dimension: int) -> None:
        """Create the index for vectors of ``dimension`` if missing (idempotent)."""
        ...

    async def upsert(self, documents: Sequence[IndexDocument]) -> None:
        """Insert or replace documents by ``event_id``."""
        ...

    async def get(self, bank_id: str, event_id: str) -> IndexDocument | None:
        """The document ``event_id`` of ``bank_id``, or ``None``."""
        ...

    async def present(self, bank_id: str, event_ids: Sequence[str]) -> set[str]:
        """Which of ``event_ids`` are documents of ``bank_id``, reading no bodies.

        One query on SQLite, one ``mget`` per ``bulk_size`` ids on OpenSearch: cheaper
        than a ``get`` per id. Raises rather than call an unread id absent
        (``UnavailableError`` where a shard could not answer).
        """
        ...

    async def search_text(self, query: str, filters: SearchFilters, *, size: int) -> list[Hit]:
        """BM25 hits for ``query``."""
        ...

    async def search_vector(
        self, vector: Sequence[float], filters: SearchFilters, *, size: int
    ) -> list[Hit]:
        """Nearest documents to ``vector`` by cosine similarity."""
        ...

    async def update(self, bank_id: str, event_id: str, patch: DocumentPatch) -> IndexDocument:
        """Apply ``patch`` and return the updated document."""
        ...

    async def update_many(self, bank_id: str, patches: Mapping[str, DocumentPatch]) -> int:
        """Apply each patch to its document of ``bank_id``; how many documents were found."""
        ...

    async def decay_page(
        self, bank_id: str, step: DecayStep, *, size: int, after: str | None = None
    ) -> DecayedPage:
        """Decay the next ``size`` documents of ``bank_id`` after ``after``, in id order."""
        ...

    async def delete(self, bank_id: str, event_id: str) -> bool:
        """Remove a document; ``True`` if it existed."""
        ...

    async def delete_many(self, bank_id: str, event_ids: Sequence[str]) -> int:
        """Remove the documents ``event_ids`` of ``bank_id``; how many there were."""
        ...

    async def neighbours(
        self,
        filters: SearchFilters,
        anchors: Sequence[IndexDocument],
        *,
        each_side: int,
        within_s: float | None = None,
        exclude: Collection[str] = (),
    ) -> list[IndexDocument]:
        """The documents around each anchor in its session (see the module docstring)."""
        ...

    async def recall_candidates(
        self,
        query_text: str,
        query_vector: Sequence[float],
        filters: SearchFilters,
        *,
        text_pool: int,
        vector_pool: int,
        neighbours: NeighbourWindow | None = None,
        procedure_versions: bool = False,
    ) -> Candidates:
        """Text and vector hits, the turns around them and procedure versions, in one trip."""
        ...

    async def scan(
        self, filters: SearchFilters, *, size: int, after: str | None = None
    ) -> list[IndexDocument]:
        """Up to ``size`` documents matching ``filters`` with ``event_id > after``, in id order."""
        ...

    async def scan_in_replay_order(
        self, filters: SearchFilters, *, size: int, after: IndexDocument | None = None
    ) -> list[IndexDocument]:
        """Up to ``size`` documents matching ``filters`` after ``after``, in replay order."""
        ...

    async def list_newest(
        self,
        filters: SearchFilters,
        *,
        size: int,
        after: ListingKey | None = None,
        include_superseded: bool = False,
    ) -> list[IndexDocument]:
        """Up to ``size`` documents matching ``filters`` after ``after``, newest first."""
        ...

    async def bank_counts(
        self, bank_ids: Collection[str] | None = None, *, size: int, after: str | None = None
    ) -> list[BankCounts]:
        """Up to ``size`` banks holding documents after ``after``, in id order, summarised."""
        ...

    async def count(self, bank_id: str | None = None) -> int:
        """Documents in ``bank_id``, or in all banks."""
        ...

    async def close(self) -> None:
        """Release connections and caches."""
        ...
