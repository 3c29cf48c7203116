"""The text arm in tantivy: one index per large bank beside the SQLite file, from its rows.

A bank is indexed here once it holds ``large_bank`` documents (and stays indexed); FTS5
answers the searches of smaller banks, and writes to them commit nothing here.

SQLite stays the commit point. A bank's tantivy index holds, per row, ``doc_id``
(what a search answers), ``seq``, ``event_id`` (the key a changed row is replaced
by), ``summary``, ``tags`` and ``detail`` (English stemming, tags at half weight as FTS5's
column weight) and the immutable filters ``fact_type`` and ``ts_us``. Mutable
filters, and every filter again, are checked in SQLite on the candidates, widening
the fetch until ``size`` pass, so an answer never holds a row the snapshot lacks.

After a committed write the writer thread calls :meth:`TantivyText.catch_up`: rows
and tombstones with a ``seq`` above the store's applied ``seq`` are applied, each
touched bank committed and its searcher reloaded, then the applied ``seq`` recorded
(``state.json``). Each touched bank is one tantivy commit (~5 ms of CPU, ~12 with its
sync), so writes are caught up at most once per ``catch_up_s``: a write sooner than that
after the last catch-up leaves it owed (:meth:`TantivyText.written`), and the next call
on the writer after it falls due pays it (a timer or a read queues one; closing pays
it). Meanwhile a search of a bank with rows above the store's ``seq`` stays here, those
rows scored by FTS5 beside it (:mod:`.tantivy_search`). The same call on open repairs a
crash between the two commits: applying a row again is idempotent (its ``event_id`` is
deleted first).
A bank with tombstones is written afresh into a new generation directory from its
surviving rows and the old directory removed, so forgotten text is in no file (a
tantivy delete only marks the document). A store made for another SQLite file (its
token differs), of another version, or missing is rebuilt from ``documents``.

Another process's writes reach this one's searches at once: a search whose SQLite
snapshot has a ``seq`` above the one its indexes answer for re-reads ``state.json``
and reloads each bank's searcher on that bank's next search. If the store is still
behind the snapshot for the searched bank (that writer owes a catch-up, is between its
two commits, or died there), FTS5, written in SQLite's own transaction, scores the rows
it lacks (or answers the whole search, past ``LAGGING_ROWS`` of them).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import secrets
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import structlog
import tantivy

from cogsub.index.ports import SearchFilters
from cogsub.index.sqlite.columns import STORED_DETAIL
from cogsub.index.sqlite.tantivy_query import en_stem, text_query
from cogsub.index.sqlite.tantivy_search import search_bank
from cogsub.sqlite_support import transaction

__all__ = ["TEXT_STORE_VERSION", "TantivyText", "text_root"]

_log = structlog.get_logger("cogsub.index.sqlite")

#: Bumped whenever the schema or analysis changes: a store of another version is rebuilt.
TEXT_STORE_VERSION = 2
#: The writer's indexing heap: tantivy's floor is 3 MB a thread; a batch is small.
WRITER_HEAP_BYTES = 15_000_000
#: Seconds a store indexing no bank may keep the ``seq`` it caught up to out of its state file:
#: no search waits on it then, and writing the file costs ~1.3 ms a write here (a create and a
#: rename). A crash or another writer meanwhile only makes a catch-up read those rows again.
UNSAVED_STATE_S = 1.0
_STATE = "state.json"
_LOCK = "lock"
_ROW_COLUMNS = f"doc_id, event_id, bank_id, fact_type, ts_us, seq, summary, tags, {STORED_DETAIL}"
# What changed since a seq, read through the seq indexes: "+bank_id" keeps SQLite from
# answering by a bank index instead, which reads every row (851 ms against 5.6 for the
# banks written since, at 350k documents; 149 against 3.9 ms for their rows).
_ROWS_AFTER = (
    f"SELECT {_ROW_COLUMNS} FROM documents"
    " WHERE seq > ? AND +bank_id IN (SELECT value FROM json_each(?))"
)
_BANKS_AFTER = "SELECT bank_id, count(*) FROM documents WHERE seq > ? GROUP BY +bank_id"
_BANK_CHANGED_AFTER = (
    "SELECT EXISTS (SELECT 1 FROM documents WHERE seq > ?1 AND +bank_id = ?2)"
    " OR EXISTS (SELECT 1 FROM tombstones WHERE seq > ?1 AND +bank_id = ?2)"
)
_DELETED_AFTER = "SELECT DISTINCT +bank_id FROM tombstones WHERE seq > ?"
_LARGE_BANKS = "SELECT bank_id FROM documents GROUP BY bank_id HAVING count(*) >= ?"


def text_root(path: str) -> Path | None:
    """The store's directory beside the SQLite file ``path``; ``None`` for ``":memory:"``."""
    if path == ":memory:":
        return None
    file = Path(path)
    return file.with_suffix(".text") if file.suffix else file.with_name(file.name + ".text")


def text_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_unsigned_field("doc_id", stored=False, indexed=False, fast=True)
    builder.add_unsigned_field("seq", stored=False, indexed=False, fast=True)
    builder.add_text_field("event_id", tokenizer_name="raw", index_option="basic")
    builder.add_text_field("summary", tokenizer_name="en_stem", index_option="position")
    builder.add_text_field("tags", tokenizer_name="en_stem", index_option="freq")
    builder.add_text_field("detail", tokenizer_name="en_stem", index_option="freq")
    builder.add_text_field("fact_type", tokenizer_name="raw", index_option="basic")
    builder.add_integer_field("ts_us", stored=False, indexed=True, fast=True)
    return builder.build()


@dataclass
class _State:
    """What the store's files hold: for which SQLite file, up to which ``seq``, where."""

    token: str
    seq: int = 0
    banks: dict[str, str] = field(default_factory=dict)  # bank -> its directory's name

    def to_json(self) -> str:
        fields = {"version": TEXT_STORE_VERSION, "token": self.token, "seq": self.seq}
        return json.dumps({**fields, "banks": self.banks}, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> _State | None:
        """The state written by this version, or ``None`` for anything else."""
        try:
            raw = json.loads(text)
            if raw.get("version") != TEXT_STORE_VERSION:
                return None
            return _State(str(raw["token"]), int(raw["seq"]), dict(raw["banks"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


_Row = tuple[int, str, str, str | None, int, int, str, str, str]


class _Behind:
    """What ``_searchable`` answers when the store lacks commits the snapshot holds."""


_BEHIND = _Behind()


class TantivyText:
    """One SQLite file's tantivy indexes, one per large bank (``root``: ``None``: in RAM).

    A bank gets an index once it holds ``large_bank`` documents, and keeps it; a smaller
    bank's searches are answered by FTS5 (``rank`` says ``None``). ``open`` and
    ``catch_up`` run on the writer thread; ``rank`` on any thread.
    """

    def __init__(self, root: Path | None, *, large_bank: int, catch_up_s: float) -> None:
        self._root = root
        self._large_bank = large_bank
        self._catch_up_s = catch_up_s
        # Set on the writer thread: when a write last caught up, and when the catch-up a
        # write put off falls due (None: none owed); any thread reads the latter as a hint.
        self._caught_up_at = -math.inf
        self._owed_at: float | None = None
        # Writer thread only: each small bank's size when last counted, plus rows written
        # since, and the store ``seq`` they account for.
        self._sizes: dict[str, int] = {}
        self._sized_to = -1
        # Writer thread only: (token, seq in the state file, seq caught up to) while the
        # latter is not written (``UNSAVED_STATE_S``), and when the file was last written.
        self._unsaved: tuple[str, int, int] | None = None
        self._saved_at = -math.inf
        self._schema = text_schema()
        self._analyzer = en_stem()
        self._state: _State | None = None
        # Replaced whole (never changed in place), so readers need no lock to read it.
        self._indexes: dict[str, tuple[str, tantivy.Index]] = {}
        # The banks the state names: one of them missing from ``_indexes`` failed to open.
        self._named: frozenset[str] = frozenset()
        self._seen_seq = -1  # the SQLite seq the indexes answer for
        self._applying_to = -1  # the seq a catch-up on the writer thread applies
        # Banks whose searcher may predate another instance's commit: reloaded when searched.
        self._stale: frozenset[str] = frozenset()
        self._refresh_lock = threading.Lock()

    # --- writer thread -------------------------------------------------------------------

    def open(self, conn: sqlite3.Connection) -> None:
        """Give the SQLite file its store token, drop leftovers, and catch up."""
        with transaction(conn, write=True):
            conn.execute(
                "INSERT OR IGNORE INTO text_store (id, token) VALUES (1, ?)",
                (secrets.token_hex(8),),
            )
        if self._root is not None:
            self._root.mkdir(exist_ok=True)
        with self._locked():
            self._catch_up_locked(conn, tidy=True)

    def catch_up(self, conn: sqlite3.Connection) -> None:
        """Apply what SQLite committed beyond the store's ``seq``; then readers see it."""
        with self._locked():
            self._catch_up_locked(conn, tidy=False)

    def written(
        self, conn: sqlite3.Connection, seq: int, *, changed: bool, at_once: bool = False
    ) -> None:
        """After SQLite's commit ``seq`` (``changed``: rows or tags written, not signals only):
        catch up now, or owe it until ``catch_up_s`` has passed since the last catch-up
        (``at_once``: now whatever the time, as for a forget). A failed catch-up is logged and
        owed again; recording a signal-only ``seq`` may raise (the caller logs it)."""
        if at_once:
            self._pay(conn)
        elif self._owed_at is not None:
            return  # already owed (a failed catch-up's backoff included): joins that one
        elif not changed and self._passed_over(conn, seq):
            return
        elif time.monotonic() - self._caught_up_at >= self._catch_up_s:
            self._pay(conn)
        else:
            self._owed_at = self._caught_up_at + self._catch_up_s

    def catch_up_in(self) -> float | None:
        """Seconds until the owed catch-up falls due (0 or less: due); ``None``: none owed.

        Any thread may ask: it is a hint, set on the writer thread.
        """
        owed_at = self._owed_at
        return None if owed_at is None else owed_at - time.monotonic()

    def catch_up_owed(self, conn: sqlite3.Connection, *, closing: bool = False) -> None:
        """The catch-up ``written`` put off, once due (``closing``: if owed at all, so other
        processes' searches need not wait for this one's next write). Never raises."""
        due_in = self.catch_up_in()
        if due_in is not None and (closing or due_in <= 0):
            self._pay(conn)

    def _pay(self, conn: sqlite3.Connection) -> None:
        """Catch up now; a failure is logged and owed again after a pause, not at once."""
        try:
            self.catch_up(conn)
        except Exception:
            _log.exception("index_text_behind")
            self._owed_at = time.monotonic() + max(self._catch_up_s, 1.0)
            return
        self._caught_up_at = time.monotonic()

    def _passed_over(self, conn: sqlite3.Connection, seq: int) -> bool:
        """Count SQLite's commit ``seq`` as applied if it only changed signals and the store
        is level up to the commit before; whether it was (if not, the caller catches up).

        Signal updates follow recalls: a tantivy commit each would cost more than the recall.
        """
        with self._locked():
            state, in_file = self._current_state()
            if state is None or state.seq != seq - 1 or self._seen_seq != seq - 1:
                return False
            state.seq = seq
            if self._sized_to == seq - 1:
                self._sized_to = seq  # a commit of signals adds no row to any bank
            # No fsync: a state lost in a crash only makes the next open apply rows again.
            self._save(state, in_file, committed=False)
            with self._refresh_lock:
                self._seen_seq = seq
        return True

    def close(self) -> None:
        self._indexes = {}

    def _catch_up_locked(self, conn: sqlite3.Connection, *, tidy: bool) -> None:
        began = time.perf_counter()
        state, in_file = self._current_state()
        with transaction(conn, write=False):
            seq, token = conn.execute(
                "SELECT s.seq, t.token FROM index_state AS s, text_store AS t"
            ).fetchone()
            by_bank: dict[str, list[_Row]] = {}
            if state is None or state.token != token or state.seq > seq:
                state, tidy, in_file = _State(token), True, -1
                self._sizes.clear()
                rebuilt = {bank for (bank,) in conn.execute(_LARGE_BANKS, (self._large_bank,))}
            else:
                by_bank, rebuilt = self._written_since(conn, state)
            indexes, kept = self._opened(state)
            # Banks whose directory is gone or unreadable start afresh too.
            rebuilt |= {bank for bank in state.banks if bank not in indexes}
            full = {bank: _bank_rows(conn, bank) for bank in rebuilt}
        self._applying_to = seq  # before any reload: searches of older snapshots go to FTS5
        gone = self._write_banks(state, indexes, by_bank, full)
        state_seq, state.seq = state.seq, seq
        self._sized_to = seq
        # Synced only when it names what tantivy just committed (or a tidied store): a state
        # holding only a new seq, lost in a crash, makes the next catch-up read those rows again.
        self._save(state, in_file, committed=bool(by_bank or full or tidy))
        with self._refresh_lock:
            if state_seq != self._seen_seq:  # another instance committed to the store since
                self._stale |= kept - by_bank.keys()
            self._indexes, self._named, self._seen_seq = indexes, frozenset(state.banks), seq
        self._owed_at = None
        for directory in gone:
            self._remove(directory)
        if tidy:
            self._remove_strays(state)
        if rebuilt:
            elapsed_ms = round((time.perf_counter() - began) * 1000)
            _log.info("index_text_banks_rebuilt", banks=len(rebuilt), elapsed_ms=elapsed_ms)

    def _written_since(
        self, conn: sqlite3.Connection, state: _State
    ) -> tuple[dict[str, list[_Row]], set[str]]:
        """Rows written after ``state.seq`` to banks with an index, by bank; and the banks to
        write afresh (grown large since, or with rows deleted). Small banks' rows are not read."""
        if state.seq != self._sized_to:  # another instance caught up rows never counted here
            self._sizes.clear()
        written = dict(conn.execute(_BANKS_AFTER, (state.seq,)).fetchall())
        deleted = {bank for (bank,) in conn.execute(_DELETED_AFTER, (state.seq,))}
        grown = {
            bank
            for bank, count in written.items()
            if bank not in state.banks and self._large(conn, bank, count)
        }
        indexed = [bank for bank in written if bank in state.banks]
        by_bank: dict[str, list[_Row]] = {}
        if indexed:
            for row in conn.execute(_ROWS_AFTER, (state.seq, json.dumps(indexed))):
                by_bank.setdefault(row[2], []).append(row)
        return by_bank, grown | (deleted & state.banks.keys())

    def _large(self, conn: sqlite3.Connection, bank_id: str, written: int) -> bool:
        """Whether ``bank_id``, which ``written`` rows were written to, now holds ``large_bank``.

        Counted (up to ``large_bank``) only when its last count plus what was written since
        could reach it: a write to a small bank must not scan it each time.
        """
        known = self._sizes.get(bank_id)
        if known is not None and known + written < self._large_bank:
            self._sizes[bank_id] = known + written  # at least its size: rows only grow by that
            return False
        (holds,) = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM documents WHERE bank_id = ? LIMIT ?)",
            (bank_id, self._large_bank),
        ).fetchone()
        self._sizes[bank_id] = int(holds)
        return int(holds) >= self._large_bank

    def _current_state(self) -> tuple[_State | None, int]:
        """The state file's, with the ``seq`` this instance caught up to and has not written
        yet if nobody wrote the file since; and the ``seq`` the file holds (-1: none)."""
        state = self._read_state()
        if state is None:
            return None, -1
        in_file, unsaved = state.seq, self._unsaved
        if unsaved is not None and unsaved[:2] == (state.token, in_file):
            state.seq = unsaved[2]
        return state, in_file

    def _save(self, state: _State, in_file: int, *, committed: bool) -> None:
        """Write the state file (``committed``: synced, as tantivy committed what it names);
        with no bank indexed, keep a new ``seq`` in memory for up to ``UNSAVED_STATE_S``."""
        now = time.monotonic()
        if committed or state.banks or now - self._saved_at >= UNSAVED_STATE_S:
            self._write_state(state, durable=committed)
            self._unsaved, self._saved_at = None, now
        else:
            self._unsaved = (state.token, in_file, state.seq)

    def _write_banks(
        self,
        state: _State,
        indexes: dict[str, tuple[str, tantivy.Index]],
        changed: dict[str, list[_Row]],
        full: dict[str, list[_Row]],
    ) -> list[str]:
        """Apply changed rows, write rebuilt banks afresh; the directories they replaced."""
        for bank, bank_rows in changed.items():
            if bank not in full:
                self._apply(indexes[bank][1], bank_rows, replace=True)
        gone = []
        for bank, bank_rows in full.items():
            directory = _directory_name(bank)
            index = self._new_index(directory)
            self._apply(index, bank_rows, replace=False)
            if bank in state.banks:
                gone.append(state.banks[bank])
            if bank_rows:
                state.banks[bank] = directory
                indexes[bank] = (directory, index)
            else:  # the bank is empty now: no directory at all
                state.banks.pop(bank, None)
                indexes.pop(bank, None)
                gone.append(directory)
        return gone

    def _apply(self, index: tantivy.Index, rows: Sequence[_Row], *, replace: bool) -> None:
        writer = index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
        for row in rows:
            if replace:
                writer.delete_documents_by_term("event_id", row[1])
            writer.add_document(self._document(row))
        writer.commit()
        writer.wait_merging_threads()
        index.reload()

    def _document(self, row: _Row) -> tantivy.Document:
        doc_id, event_id, _, fact_type, ts_us, seq, summary, tags, detail = row
        doc = tantivy.Document()
        doc.add_unsigned("doc_id", doc_id)
        doc.add_unsigned("seq", seq)
        doc.add_text("event_id", event_id)
        doc.add_text("summary", summary)
        doc.add_text("tags", " ".join(json.loads(tags)))
        doc.add_text("detail", detail)
        doc.add_text("fact_type", fact_type or "")
        doc.add_integer("ts_us", ts_us)
        return doc

    def _opened(self, state: _State) -> tuple[dict[str, tuple[str, tantivy.Index]], set[str]]:
        """Each bank's index as ``state`` names it, and the banks whose open index was kept.

        A bank whose files fail to open is left out (its searches go to FTS5). A kept index
        is not reloaded here: only a search of its bank needs it current (``_stale``).
        """
        indexes, kept = {}, set()
        for bank, directory in state.banks.items():
            known = self._indexes.get(bank)
            if known is not None and known[0] == directory:
                indexes[bank] = known
                kept.add(bank)
            elif (index := self._existing_index(directory)) is not None:
                indexes[bank] = (directory, index)
        return indexes, kept

    # --- any thread ----------------------------------------------------------------------

    def rank(
        self, conn: sqlite3.Connection, terms: list[str], filters: SearchFilters, size: int
    ) -> list[tuple[int, float]] | None:
        """``(doc_id, bm25)`` of the best ``size`` rows of ``conn``'s snapshot, best first.

        ``None`` when FTS5 answers: the bank is too small to have an index here, or the
        store lacks too many of the snapshot's rows of it (``search_bank``).
        """
        found = self._searchable(conn, filters.bank_id)
        if found is None or isinstance(found, _Behind):
            return None
        index, behind_since, seq = found
        searcher = index.searcher()
        # Taken before this check: a catch-up says what it applies before it reloads a bank.
        if seq < max(self._seen_seq, self._applying_to):
            return None  # the store holds commits newer than this snapshot: FTS5 answers it
        query = text_query(self._schema, self._analyzer, searcher, terms, filters)
        return search_bank(searcher, query, conn, terms, filters, size, behind_since=behind_since)

    def _searchable(
        self, conn: sqlite3.Connection, bank_id: str
    ) -> tuple[tantivy.Index, int | None, int] | None | _Behind:
        """The bank's current index and, if the snapshot holds rows of the bank the store
        lacks, the ``seq`` it holds them to; ``None`` if it has none; ``_BEHIND`` if the
        store lags and the bank has no index to answer with.

        Nothing changed since the last search costs one integer compare. A bank without an
        index may have grown large in a commit the store lacks: it is asked the same way.
        While this instance owes a catch-up, the lag is its own: no file to read again.
        """
        behind_since = None
        (seq,) = conn.execute("SELECT seq FROM index_state").fetchone()
        if seq > self._seen_seq:
            if self._owed_at is None:
                self._refresh(conn)
            seen = self._seen_seq
            if seq > seen and conn.execute(_BANK_CHANGED_AFTER, (seen, bank_id)).fetchone()[0]:
                _log.debug("index_text_behind_snapshot", snapshot=seq, store=seen)
                behind_since = seen
        if bank_id in self._stale:
            self._reload(bank_id)
        found = self._indexes.get(bank_id)
        if found is None and bank_id in self._named:
            # Its directory failed to open: another writer replaced it between this
            # instance's reading the state and opening it. Read the state again.
            self._refresh(conn, retry=True)
            found = self._indexes.get(bank_id)
            if found is None and bank_id in self._named:
                _log.debug("index_text_bank_unopened", bank_id=bank_id)
                return _BEHIND
        if found is None:
            return None if behind_since is None else _BEHIND
        return found[1], behind_since, seq

    def _refresh(self, conn: sqlite3.Connection, *, retry: bool = False) -> None:
        """Take up what another instance committed to the store since (``state.json``).

        ``retry``: open the banks again even if the store has no commit since.
        """
        with self._refresh_lock:
            state = self._read_state()
            if state is None or state.seq < self._seen_seq:
                return  # a store this instance is ahead of
            if state.seq == self._seen_seq and not retry:
                return  # nothing committed to the store since (a writer may be on its way)
            (token,) = conn.execute("SELECT token FROM text_store").fetchone()
            if state.token != token:
                return  # a store of another file: this file's writer rebuilds it on open
            indexes, kept = self._opened(state)
            self._stale |= kept
            self._indexes, self._named = indexes, frozenset(state.banks)
            self._seen_seq = state.seq

    def _reload(self, bank_id: str) -> None:
        with self._refresh_lock:
            found = self._indexes.get(bank_id)
            if bank_id in self._stale and found is not None:
                found[1].reload()
            self._stale -= {bank_id}

    # --- files ---------------------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The store to this thread alone, across processes (two writers would race)."""
        if self._root is None:
            yield
            return
        with open(self._root / _LOCK, "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read_state(self) -> _State | None:
        if self._root is None:  # a copy: a failed catch-up must leave it as it was
            state = self._state
            return None if state is None else _State(state.token, state.seq, dict(state.banks))
        try:
            return _State.from_json((self._root / _STATE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None

    def _write_state(self, state: _State, *, durable: bool = True) -> None:
        """Replace the state file in one rename, once the banks it names are committed."""
        if self._root is None:
            self._state = state
            return
        temporary = self._root / f"{_STATE}.new"
        with open(temporary, "w", encoding="utf-8") as out:
            out.write(state.to_json())
            out.flush()
            if durable:
                os.fsync(out.fileno())
        os.replace(temporary, self._root / _STATE)

    def _new_index(self, directory: str) -> tantivy.Index:
        if self._root is None:
            return _manual(tantivy.Index(self._schema))
        (self._root / directory).mkdir()
        return _manual(tantivy.Index(self._schema, path=str(self._root / directory)))

    def _existing_index(self, directory: str) -> tantivy.Index | None:
        if self._root is None:
            return None
        place = self._root / directory
        try:
            if not tantivy.Index.exists(str(place)):
                return None
            return _manual(tantivy.Index.open(str(place)))
        except (OSError, ValueError) as exc:
            _log.warning("index_text_bank_unreadable", directory=directory, error=str(exc))
            return None

    def _remove(self, directory: str) -> None:
        if self._root is not None:
            shutil.rmtree(self._root / directory, ignore_errors=True)

    def _remove_strays(self, state: _State) -> None:
        """Directories no state names: a rebuild a crash interrupted, or the one it replaced."""
        if self._root is None:
            return
        named = set(state.banks.values())
        for entry in self._root.iterdir():
            if entry.is_dir() and entry.name not in named:
                shutil.rmtree(entry, ignore_errors=True)


def _manual(index: tantivy.Index) -> tantivy.Index:
    """No reload thread per bank: the writer reloads after its commits, readers on refresh."""
    index.config_reader(reload_policy="Manual")
    return index


def _directory_name(bank_id: str) -> str:
    digest = hashlib.sha256(bank_id.encode()).hexdigest()[:16]
    return f"{digest}-{secrets.token_hex(4)}"


def _bank_rows(conn: sqlite3.Connection, bank_id: str) -> list[_Row]:
    return conn.execute(
        f"SELECT {_ROW_COLUMNS} FROM documents WHERE bank_id = ?", (bank_id,)
    ).fetchall()
