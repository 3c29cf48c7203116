"""The vector cache: unit document vectors in memory, searched exactly (no SQL here).

Each bank's vectors live as its own (dimension x capacity) float32 matrix of unit
columns (one column, or slot, per document: the column-major matrix-vector product
measured ~2x faster here than row-major) with parallel arrays for the filters, so a
search reads its bank's columns only (one matrix for every bank read 100x the useful
columns at 100 banks). Search is exact: score every column of the bank, mask by the
filters, take the top k, a block of ``SEARCH_BLOCK`` slots at a time. The cache takes
rows of ``CACHE_ROW_COLUMNS`` (from the file or from the index's own writes); keeping
it current is the index's job.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from cogsub.core.events import FactType
from cogsub.index.ports import SearchFilters
from cogsub.index.sqlite.columns import FACT_CODES, CacheRow, epoch_us

__all__ = [
    "SEARCH_BLOCK",
    "BankVectors",
    "SlotFilter",
    "TagSets",
    "VectorCache",
    "one_blas_thread",
    "unit",
]

#: Slots a vector search scores at a time: its scratch and selections stay this size
#: (under the allocator's mmap threshold) whatever the index holds.
SEARCH_BLOCK = 1 << 16

#: A new bank's first slots (at 384 dimensions, 96 kB of columns).
_FIRST_CAPACITY = 64


@functools.cache
def one_blas_thread() -> None:
    """Keep numpy's BLAS on the calling thread, for the whole process.

    The matrix-vector product is memory-bound: a second BLAS thread did not
    shorten it here (11.1 ms against 8.7 ms at 384 x 100k), while OpenBLAS's extra
    thread spins between calls and under a steady stream of searches burned most
    of a core (1.3 s of CPU against 0.07 s for 200 products of 8 x 150k). Once per
    process: the limit is process-wide.
    """
    threadpool_limits(limits=1, user_api="blas")


def unit(vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0.0 else vector


class TagSets:
    """Distinct tag sets by number (0: no tags), each counted by the slots that hold it.

    A set no slot holds any more gives its number back, so the sets stay as many as
    the documents have, however they were re-tagged or forgotten. Which sets hold a
    tag is kept per tag and updated as sets come and go, not rebuilt.
    """

    _MAX_CACHED_TAGS = 1024  # filters name any string; only so many answers are kept

    def __init__(self) -> None:
        self._sets: list[tuple[str, ...]] = [()]
        self._users = [0]
        self._numbers: dict[tuple[str, ...], int] = {(): 0}
        self._free: list[int] = []
        self._capacity = 64
        self._holding: dict[str, npt.NDArray[np.bool_]] = {}

    def __len__(self) -> int:
        return len(self._numbers)

    def take(self, tags: tuple[str, ...]) -> int:
        """The number of ``tags``, counted once more."""
        number = self._numbers.get(tags)
        if number is None:
            number = self._add(tags)
        self._users[number] += 1
        return number

    def release(self, number: int) -> None:
        """One slot fewer holds set ``number``; the last one gives the number back."""
        if number == 0:
            return
        self._users[number] -= 1
        if self._users[number] == 0:
            del self._numbers[self._sets[number]]
            self._sets[number] = ()
            self._free.append(number)
            for holding in self._holding.values():
                holding[number] = False

    def holding_any(self, tags: Collection[str]) -> npt.NDArray[np.bool_]:
        """By set number: whether the set holds any of ``tags``."""
        wanted = np.zeros(self._capacity, dtype=np.bool_)
        for tag in tags:
            wanted |= self._holding_tag(tag)
        return wanted

    def sets_of(self, numbers: Collection[int]) -> list[tuple[str, ...]]:
        """The tag sets numbered ``numbers``."""
        return [self._sets[number] for number in numbers]

    def _add(self, tags: tuple[str, ...]) -> int:
        if self._free:
            number = self._free.pop()
            self._sets[number] = tags
        else:
            number = len(self._sets)
            self._sets.append(tags)
            self._users.append(0)
            if number == self._capacity:
                self._grow()
        self._numbers[tags] = number
        for tag, holding in self._holding.items():
            holding[number] = tag in tags
        return number

    def _grow(self) -> None:
        self._capacity *= 2
        for tag, holding in self._holding.items():
            grown = np.zeros(self._capacity, dtype=np.bool_)
            grown[: holding.size] = holding
            self._holding[tag] = grown

    def _holding_tag(self, tag: str) -> npt.NDArray[np.bool_]:
        holding = self._holding.get(tag)
        if holding is None:
            holding = np.zeros(self._capacity, dtype=np.bool_)
            sets = self._sets
            holding[: len(sets)] = np.fromiter((tag in t for t in sets), np.bool_, len(sets))
            if len(self._holding) >= self._MAX_CACHED_TAGS:
                self._holding.clear()
            self._holding[tag] = holding
        return holding


def block_bytes(size: int) -> int:
    """What an object of ``size`` bytes takes: pymalloc serves 512 bytes or fewer
    in blocks of 16-byte steps (a 32-character id's 81 bytes take 96)."""
    return size if size > 512 else -(-size // 16) * 16


def entry_bytes(key: str, slot: int) -> int:
    return block_bytes(sys.getsizeof(key)) + block_bytes(sys.getsizeof(slot))


class BankVectors:
    """One bank's unit vectors as matrix columns (slots), with parallel filter arrays.

    Its own slot map (by event id) and free slots: a search of the bank reads only
    these columns, however many the other banks hold.
    """

    def __init__(self, dimension: int) -> None:
        self.used = 0
        self.columns = np.zeros((dimension, 0), dtype=np.float32)
        self.live = np.zeros(0, dtype=np.bool_)  # a freed slot waits for reuse
        self.facts = np.zeros(0, dtype=np.int8)
        self.times = np.zeros(0, dtype=np.int64)
        self.importance = np.zeros(0, dtype=np.float64)
        self.doc_ids = np.zeros(0, dtype=np.int64)
        # A slot's tags as the number of its tag set: documents share a few sets (a
        # set of slots per tag and a tuple per slot took ~250 bytes a document).
        self.tag_sets = np.zeros(0, dtype=np.int32)
        self.slot_of: dict[str, int] = {}
        self.free: list[int] = []

    @property
    def capacity(self) -> int:
        return int(self.columns.shape[1])

    def arrays(self) -> tuple[npt.NDArray[Any], ...]:
        return (
            self.columns,
            self.live,
            self.facts,
            self.times,
            self.importance,
            self.doc_ids,
            self.tag_sets,
        )

    def reserve(self, needed: int) -> None:
        capacity = self.capacity
        if needed <= capacity:
            return
        # Grow by half: copying a large bank for every few inserts would stall writers.
        # A small first size: a hundred banks of a few documents stay small.
        extra = max(needed, capacity + capacity // 2, _FIRST_CAPACITY) - capacity
        dimension = self.columns.shape[0]
        self.columns = np.concatenate(
            [self.columns, np.zeros((dimension, extra), dtype=np.float32)], axis=1
        )
        self.live = np.concatenate([self.live, np.zeros(extra, dtype=np.bool_)])
        self.facts = np.concatenate([self.facts, np.zeros(extra, dtype=np.int8)])
        self.times = np.concatenate([self.times, np.zeros(extra, dtype=np.int64)])
        self.importance = np.concatenate([self.importance, np.zeros(extra, dtype=np.float64)])
        self.doc_ids = np.concatenate([self.doc_ids, np.zeros(extra, dtype=np.int64)])
        self.tag_sets = np.concatenate([self.tag_sets, np.zeros(extra, dtype=np.int32)])

    def put(self, rows: Sequence[CacheRow], tags: TagSets) -> int:
        """Insert or replace rows (one per event); the id map's bytes added."""
        added = 0
        fresh = sum(1 for row in rows if row[1] not in self.slot_of)
        self.reserve(self.used + max(0, fresh - len(self.free)))
        slots = np.empty(len(rows), dtype=np.int64)
        for index, row in enumerate(rows):
            slot = self.slot_of.get(row[1])
            if slot is None:
                slot = self.slot_of[row[1]] = self._take_slot()
                added += entry_bytes(row[1], slot)
            slots[index] = slot
        # Whole columns at once: an item at a time was most of a load's time.
        replaced = self.tag_sets[slots]
        self.tag_sets[slots] = [tags.take(tuple(json.loads(row[6]))) for row in rows]
        for number in replaced.tolist():
            tags.release(number)  # after the takes: a set kept by its own row stays numbered
        self.live[slots] = True
        self.doc_ids[slots] = [row[0] for row in rows]
        self.facts[slots] = [0 if row[3] is None else FACT_CODES[FactType(row[3])] for row in rows]
        self.times[slots] = [row[4] for row in rows]
        self.importance[slots] = [row[5] for row in rows]
        dimension = self.columns.shape[0]
        matrix = np.frombuffer(b"".join(row[-1] for row in rows), dtype=np.float32)
        matrix = matrix.reshape(len(rows), dimension)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        self.columns[:, slots] = (matrix / np.where(norms > 0, norms, 1.0)).T
        return added

    def remove(self, event_id: str, tags: TagSets) -> int:
        """Free ``event_id``'s slot; the id map's bytes given back (0 if it held none)."""
        slot = self.slot_of.pop(event_id, None)
        if slot is None:
            return 0
        tags.release(int(self.tag_sets[slot]))
        self.tag_sets[slot] = 0
        self.live[slot] = False
        self.columns[:, slot] = 0.0
        self.free.append(slot)
        return entry_bytes(event_id, slot)

    def _take_slot(self) -> int:
        """A free slot, or the next one (``put`` reserved room for it)."""
        if self.free:
            return self.free.pop()
        slot, self.used = self.used, self.used + 1
        return slot


class VectorCache:
    """Every bank's vectors, a ``BankVectors`` a bank, and the tag sets they share.

    Rows come in as tuples of ``CACHE_ROW_COLUMNS``, from SQLite or from our own writes.
    """

    def __init__(self, dimension: int, seq: int) -> None:
        self.seq = seq
        self.dimension = dimension
        self.banks: dict[str, BankVectors] = {}
        # A search block's filter mask, one filter's test and scores, written in place
        # (as long as the largest bank's slots up to a block: small banks keep small ones).
        self._mask_scratch = np.zeros(0, dtype=np.bool_)
        self._test_scratch = np.zeros(0, dtype=np.bool_)
        self._score_scratch = np.zeros(0, dtype=np.float32)
        self._tags = TagSets()
        # What the maps' ids and slot numbers hold besides the dicts' own tables, kept as
        # they come and go: summing them at every report would walk a million strings.
        self._id_bytes = 0

    @property
    def used(self) -> int:
        """Slots taken in every bank, free ones waiting for reuse included."""
        return sum(bank.used for bank in self._banks_now())

    @property
    def id_map_bytes(self) -> int:
        """The id → slot maps: their tables, their id strings and their slot numbers."""
        tables = sum(sys.getsizeof(bank.slot_of) for bank in self._banks_now())
        return sys.getsizeof(self.banks) + tables + self._id_bytes

    @property
    def nbytes(self) -> int:
        scratch = (self._mask_scratch, self._test_scratch, self._score_scratch)
        banks = (array for bank in self._banks_now() for array in bank.arrays())
        return sum(array.nbytes for array in (*scratch, *banks))

    def reserve(self, counts: Mapping[str, int]) -> None:
        """Room for the documents to come, ``counts`` by bank, and an eighth more.

        For a load, which knows its banks' sizes: growing by half as the rows came
        held each bank's old and new matrices at once (a peak of ~2x the final
        size) and left up to half of a bank unused.
        """
        for bank_id, count in counts.items():
            bank = self.banks.get(bank_id)
            if bank is None:
                bank = self.banks[bank_id] = BankVectors(self.dimension)
            bank.reserve(bank.used + count + count // 8)
            self._fit_scratch(bank.capacity)

    def put(self, rows: Sequence[CacheRow]) -> None:
        """Insert or replace rows of ``CACHE_ROW_COLUMNS``; the last row of an event wins."""
        by_bank: dict[str, list[CacheRow]] = {}
        for row in {(row[2], row[1]): row for row in rows}.values():
            by_bank.setdefault(row[2], []).append(row)
        for bank_id, bank_rows in by_bank.items():
            bank = self.banks.get(bank_id)
            if bank is None:
                bank = self.banks[bank_id] = BankVectors(self.dimension)
            self._id_bytes += bank.put(bank_rows, self._tags)
            self._fit_scratch(bank.capacity)

    def remove(self, bank_id: str, event_id: str) -> None:
        bank = self.banks.get(bank_id)
        if bank is not None:
            self._id_bytes -= bank.remove(event_id, self._tags)

    def remove_all(self, bank_id: str, event_ids: Sequence[str]) -> None:
        for event_id in event_ids:
            self.remove(bank_id, event_id)

    def set_importance(self, bank_id: str, event_id: str, value: float) -> None:
        bank = self.banks.get(bank_id)
        slot = None if bank is None else bank.slot_of.get(event_id)
        if bank is not None and slot is not None:
            bank.importance[slot] = value

    def tag_sets_holding(self, bank_id: str, tags: Collection[str]) -> list[tuple[str, ...]]:
        """The distinct tag sets of ``bank_id``'s documents that hold any of ``tags``."""
        bank = self.banks.get(bank_id)
        if bank is None or not tags:
            return []
        holding = self._tags.holding_any(tags)
        # A free slot holds set 0, the empty set, which holds no tag.
        numbers = np.unique(bank.tag_sets[: bank.used])
        return self._tags.sets_of([int(n) for n in numbers if holding[n]])

    def search(
        self, query: npt.NDArray[np.float32], filters: SearchFilters, size: int
    ) -> list[tuple[int, float]]:
        """``(doc_id, cosine)`` of the best ``size`` documents passing ``filters``.

        Best first; equal scores in slot order (within the bank, the order its
        documents came in, a freed slot going to the next newcomer).
        """
        bank = self.banks.get(filters.bank_id)
        if bank is None or size < 1:
            return []
        wanted = SlotFilter.of(filters, self._tags)
        best_slots = np.zeros(0, dtype=np.int64)
        best_scores = np.zeros(0, dtype=np.float32)
        # A block of slots at a time, keeping the best so far: what a search allocates
        # stays the same however many documents the bank holds (whole-index masks,
        # candidate lists and selections were ~20 bytes a document, every search).
        for start in range(0, bank.used, SEARCH_BLOCK):
            stop = min(start + SEARCH_BLOCK, bank.used)
            # Once ``size`` are kept, a later slot must beat the worst of them: a tie
            # goes to the earlier slot, which every kept one is.
            floor = float(best_scores[-1]) if best_scores.size == size else None
            found = self._best_in_block(query, bank, wanted, (start, stop), size, floor)
            if found is not None:
                best_slots = np.concatenate([best_slots, found[0]])
                best_scores = np.concatenate([best_scores, found[1]])
                order = np.lexsort((best_slots, -best_scores))[:size]
                best_slots, best_scores = best_slots[order], best_scores[order]
        return [
            (int(bank.doc_ids[slot]), float(score))
            for slot, score in zip(best_slots, best_scores, strict=True)
        ]

    def _banks_now(self) -> tuple[BankVectors, ...]:
        # Reports read from any thread while the writer may add a bank: a tuple is taken
        # in one step, where iterating the dict itself could fail halfway.
        return tuple(self.banks.values())

    def _fit_scratch(self, capacity: int) -> None:
        width = min(capacity, SEARCH_BLOCK)
        if self._mask_scratch.size < width:
            self._mask_scratch = np.empty(width, dtype=np.bool_)
            self._test_scratch = np.empty(width, dtype=np.bool_)
            self._score_scratch = np.empty(width, dtype=np.float32)

    def _best_in_block(
        self,
        query: npt.NDArray[np.float32],
        bank: BankVectors,
        wanted: SlotFilter,
        block: tuple[int, int],
        size: int,
        floor: float | None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None:
        """The block's slots that pass and score above ``floor``: its best ``size`` of them."""
        start, stop = block
        width = stop - start
        test = self._test_scratch[:width]
        mask = self._mask_scratch[:width]
        np.copyto(mask, bank.live[start:stop])
        wanted.narrow(mask, bank, block, test)
        # Scoring every column of the block and then selecting beats gathering the
        # candidate columns (a strided gather costs more than the product it saves).
        scored = np.matmul(query, bank.columns[:, start:stop], out=self._score_scratch[:width])
        if floor is not None:
            mask &= np.greater(scored, floor, out=test)
        candidates = np.flatnonzero(mask)
        if candidates.size == 0:
            return None
        scores = scored[candidates]
        if candidates.size > size:
            # Select among candidates only (a partition crawls over many equal -inf):
            # all above the cut, then the earliest slots scoring just the cut.
            cut = np.partition(scores, candidates.size - size)[candidates.size - size]
            above = np.flatnonzero(scores > cut)
            at = np.flatnonzero(scores == cut)[: size - above.size]
            keep = np.concatenate([above, at])
            candidates, scores = candidates[keep], scores[keep]
        return candidates + start, scores


@dataclass(frozen=True)
class SlotFilter:
    """A search's filters beyond the bank, as tests on the slots' parallel arrays."""

    facts: npt.NDArray[np.bool_] | None  # by fact code: allowed
    since_us: int | None
    until_us: int | None
    min_importance: float | None
    tag_sets: npt.NDArray[np.bool_] | None  # by tag set number: holds a wanted tag

    @classmethod
    def of(cls, filters: SearchFilters, tags: TagSets) -> SlotFilter:
        facts = None
        if filters.fact_types is not None:
            facts = np.zeros(len(FACT_CODES) + 1, dtype=np.bool_)
            facts[[FACT_CODES[FactType(fact)] for fact in filters.fact_types]] = True
        return cls(
            facts=facts,
            since_us=None if filters.since is None else epoch_us(filters.since),
            until_us=None if filters.until is None else epoch_us(filters.until),
            min_importance=filters.min_importance,
            tag_sets=None if filters.tags_any is None else tags.holding_any(filters.tags_any),
        )

    def narrow(
        self,
        mask: npt.NDArray[np.bool_],
        vectors: BankVectors,
        block: tuple[int, int],
        test: npt.NDArray[np.bool_],
    ) -> None:
        """Clear in ``mask`` the slots of ``block`` (start, stop) that fail; ``test`` is scratch."""
        start, stop = block
        if self.facts is not None:
            mask &= np.take(self.facts, vectors.facts[start:stop], out=test, mode="clip")
        if self.since_us is not None:
            mask &= np.greater_equal(vectors.times[start:stop], self.since_us, out=test)
        if self.until_us is not None:
            mask &= np.less(vectors.times[start:stop], self.until_us, out=test)
        if self.min_importance is not None:
            importance = vectors.importance[start:stop]
            mask &= np.greater_equal(importance, self.min_importance, out=test)
        if self.tag_sets is not None:
            mask &= np.take(self.tag_sets, vectors.tag_sets[start:stop], out=test, mode="clip")
